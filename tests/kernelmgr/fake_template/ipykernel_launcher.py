"""tests/kernelmgr/fake_template/ipykernel_launcher.py: `python3 -m ipykernel_launcher -f CONNECTION_FILE` for
tests/kernelmgr/test_template.c (this directory on PYTHONPATH): a kernel spawned instead of forked runs
tests/kernelmgr/fake_kernel.py too, as the fake template's forked kernels do."""

import os
import runpy
import sys

FAKE_KERNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fake_kernel.py")
sys.argv = [FAKE_KERNEL, sys.argv[sys.argv.index("-f") + 1]]
runpy.run_path(FAKE_KERNEL, run_name="__main__")
