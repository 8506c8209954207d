"""tests/kernels/test_bash_kernel.py: the Jupyter conformance suite (jupyter_kernel_test) against kgate-bash-kernel.

Run with JUPYTER_PATH=<build>/kernels/share/jupyter so that the kernelspec "bash" is the one built.
"""
import unittest

import jupyter_kernel_test


class BashKernelTests(jupyter_kernel_test.KernelTests):
    kernel_name = "bash"
    language_name = "bash"
    file_extension = ".sh"

    code_hello_world = "echo hello, world"
    code_stderr = "echo oops >&2"
    code_generate_error = "false"

    completion_samples = [
        {"text": "ech", "matches": {"echo"}},
        {"text": "cd /bi", "matches": {"/bin/"}},
        {"text": "echo $HOM", "matches": {"$HOME"}},
    ]
    complete_code_samples = ["echo hi", "if true; then echo a; fi", "cat <<EOF\nx\nEOF\n", ""]
    incomplete_code_samples = ["if true; then", 'echo "abc', "for i in 1 2; do", "echo a |", "cat <<EOF\nx", "echo a \\"]
    invalid_code_samples = ["fi", "done", "echo )"]


if __name__ == "__main__":
    unittest.main()
