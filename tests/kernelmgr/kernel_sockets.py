# tests/kernelmgr/kernel_sockets.py: a test kernel's five sockets, bound as ipykernel binds them from its connection file
# (shared by fake_kernel.py and slow_kernel.py, which import it from their own directory).
import zmq


def bind_all(cfg):
    """(shell, iopub, stdin, control, hb), bound to the endpoints jupyter_client builds from the connection file `cfg`."""
    ctx = zmq.Context.instance()

    def bind(kind, name):
        s = ctx.socket(kind)
        # tcp://ip:port or ipc://ip-port
        sep = ":" if cfg["transport"] == "tcp" else "-"
        s.bind("%s://%s%s%d" % (cfg["transport"], cfg["ip"], sep, cfg[name + "_port"]))
        return s

    return (bind(zmq.ROUTER, "shell"), bind(zmq.PUB, "iopub"), bind(zmq.ROUTER, "stdin"), bind(zmq.ROUTER, "control"),
            bind(zmq.ROUTER, "hb"))
