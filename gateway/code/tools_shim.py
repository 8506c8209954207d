# gateway/code/tools_shim.py: code mode's kernel side for Python (ipykernel): the caller's tools as functions.
#
# kgate embeds this file (code/tools.c) and runs it, silently and without history, before a run that
# declares tools, as the module `_kgate_codemode` (kept in sys.modules, re-created when kgate's copy
# changes); then install() binds one function per tool in the user's namespace, and nothing else.
#
# A call travels on the Jupyter protocol's own stdin channel: the kernel's raw_input sends an
# input_request whose prompt is MARK followed by a JSON batch {"calls": [{"name", "arguments"}]},
# and blocks until kgate's input_reply carries {"results": [{"result": x} | {"error": "m"}]} (one per
# call, in order) or {"error": "m"} (for the whole batch). stdin is used rather than comms because
# ipykernel handles no shell message (comm_msg included) while a cell runs, whereas an input_request
# is answered while the cell blocks, exactly as input() is.
#
# Calls made in async code (an `async def`, or a cell that uses top-level await) return an awaitable
# ToolCall and join the pending batch; awaiting any of them sends every pending call of the cell as
# one batch, so calls fired before an await run concurrently on the caller's side. Calls made
# elsewhere send the pending batch with themselves and return the result.

import ast as _ast
import inspect as _inspect
import json as _json
import signal as _signal
import sys as _sys
import threading as _threading

MARK = "\x1fkgate-tool-calls/1\x1f"
_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>")
_ASYNC_FLAGS = _inspect.CO_COROUTINE | _inspect.CO_ASYNC_GENERATOR | _inspect.CO_ITERABLE_COROUTINE

_limits = {"max_argument_bytes": 1 << 20}
_installed = {}  # identifier -> the function install() bound there
_pending = []  # ToolCall objects not sent yet
_cell_async = {}  # msg_id of the cell -> whether it runs as a coroutine (one entry)


class ToolError(Exception):
    """A tool answered with an error (or could not be called): the message names the tool."""


class _Missing:
    def __repr__(self):
        return "..."


def _shell():
    from IPython import get_ipython

    return get_ipython()


def _parent():
    kernel = _shell().kernel
    get_parent = getattr(kernel, "get_parent", None)
    return get_parent("shell") if get_parent is not None else kernel._parent_header


def _cell_id():
    try:
        return _parent()["header"]["msg_id"]
    except Exception:
        return None


def _cell_is_async():
    try:
        parent = _parent()
        msg_id, code = parent["header"]["msg_id"], parent["content"]["code"]
    except Exception:
        return False
    if msg_id not in _cell_async:
        shell = _shell()
        try:
            source = shell.transform_cell(code)
        except Exception:
            source = code
        try:
            compiled = compile(source, "<cell>", "exec", flags=_ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            is_async = bool(compiled.co_flags & _inspect.CO_COROUTINE)
        except (SyntaxError, ValueError):
            is_async = False
        _cell_async.clear()
        _cell_async[msg_id] = is_async
    return _cell_async[msg_id]


def _caller_is_async(frame):
    # comprehensions and lambdas written in the cell count as the cell (Python < 3.12 gives them frames)
    while frame is not None and frame.f_code.co_name in _COMPREHENSIONS and not frame.f_code.co_flags & _ASYNC_FLAGS:
        frame = frame.f_back
    if frame is None:
        return False
    if frame.f_code.co_flags & _ASYNC_FLAGS:
        return True
    return frame.f_code.co_name == "<module>" and frame.f_globals is _shell().user_ns and _cell_is_async()


class _Interruptible:
    # In an async cell ipykernel turns SIGINT into cancelling the cell's future, which needs the event
    # loop this wait blocks: while it waits, SIGINT raises KeyboardInterrupt instead (unless ignored).
    def __enter__(self):
        self.saved = None
        if _threading.current_thread() is _threading.main_thread():
            current = _signal.getsignal(_signal.SIGINT)
            if current not in (_signal.SIG_IGN, _signal.default_int_handler):
                self.saved = current
                _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            _signal.signal(_signal.SIGINT, self.saved)
        return False


class ToolCall:
    """A call of a tool made in async code: `await` it for the result (which raises ToolError on an error answer)."""

    __slots__ = ("name", "ident", "arguments", "cell", "done", "value", "error")

    def __init__(self, name, ident, arguments, cell):
        self.name, self.ident, self.arguments, self.cell = name, ident, arguments, cell
        self.done, self.value, self.error = False, None, None

    def _settle(self, value, error):
        self.done, self.value, self.error = True, value, error

    def _result(self):
        __tracebackhide__ = True  # IPython leaves kgate's frames out of the traceback
        if self.error is not None:
            raise ToolError(f"tool {self.name!r} failed: {self.error}")
        return self.value

    def __await__(self):
        __tracebackhide__ = True
        if not self.done:
            try:
                _flush()
            except KeyboardInterrupt:
                # a KeyboardInterrupt leaving an asyncio task (asyncio.gather's) would stop the kernel's own loop
                import asyncio

                raise asyncio.CancelledError("interrupted while waiting for tool results") from None
        return self._result()
        yield  # makes __await__ a generator

    def __repr__(self):
        state = "pending" if not self.done else ("failed" if self.error is not None else "done")
        return f"<ToolCall {self.ident}(...) {state}: await it for the result>"


def _flush():
    cell = _cell_id()
    batch, stale = [], []
    for call in _pending:
        (batch if call.cell == cell else stale).append(call)
    del _pending[:]
    for call in stale:
        call._settle(None, "the call was never awaited in the run that made it")
    if not batch:
        return
    prompt = MARK + '{"calls":[' + ",".join(
        '{"name":%s,"arguments":%s}' % (_json.dumps(c.name), c.arguments) for c in batch) + "]}"
    kernel = _shell().kernel
    try:
        with _Interruptible():
            answer = kernel.raw_input(prompt)
    except BaseException as e:
        for call in batch:
            call._settle(None, f"the call was abandoned ({type(e).__name__})")
        from IPython.core.error import StdinNotImplementedError

        if isinstance(e, StdinNotImplementedError):
            raise ToolError(f"tool {batch[0].name!r} can only be called during the run that declared it") from None
        raise
    try:
        reply = _json.loads(answer)
    except ValueError:
        reply = {"error": "kgate's answer was lost (a batch larger than --max-message-bytes?)"}
    results = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(results, list) or len(results) != len(batch):
        error = reply.get("error") if isinstance(reply, dict) else None
        for call in batch:
            call._settle(None, error if isinstance(error, str) else "kgate sent no answer for this call")
        return
    for call, result in zip(batch, results):
        if isinstance(result, dict) and "error" in result:
            call._settle(None, str(result["error"]))
        else:
            call._settle(result.get("result") if isinstance(result, dict) else None, None)


def _signature(schema):
    params = []
    props = schema.get("properties") if isinstance(schema, dict) else None
    required = schema.get("required", []) if isinstance(schema, dict) else []
    if isinstance(props, dict):
        for key in props:
            if isinstance(key, str) and key.isidentifier():
                default = _inspect.Parameter.empty if key in required else _Missing()
                params.append(_inspect.Parameter(key, _inspect.Parameter.KEYWORD_ONLY, default=default))
    return _inspect.Signature(params)


def _make_tool(name, ident, description, schema):
    def tool(*args, **kwargs):
        __tracebackhide__ = True
        if args:
            raise TypeError(f"{ident}() takes keyword arguments only (the tool's input is a JSON object)")
        try:
            arguments = _json.dumps(kwargs, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise TypeError(f"{ident}(): the arguments must be JSON-serialisable: {e}") from None
        if len(arguments.encode()) > _limits["max_argument_bytes"]:
            raise ValueError(f"{ident}(): the arguments exceed {_limits['max_argument_bytes']} bytes as JSON "
                             "(kgate's --max-tool-argument-bytes)")
        call = ToolCall(name, ident, arguments, _cell_id())
        _pending.append(call)
        if _caller_is_async(_sys._getframe(1)):
            return call
        _flush()
        return call._result()

    tool.__name__ = tool.__qualname__ = ident
    tool.__module__ = "_kgate_codemode"
    tool.__doc__ = description
    try:
        tool.__signature__ = _signature(schema)
    except (TypeError, ValueError):
        pass
    return tool


def install(spec_text):
    """Binds the tools of `spec_text` (JSON from kgate) in the user's namespace, replacing those of an earlier run."""
    spec = _json.loads(spec_text)
    ns = _shell().user_ns
    for ident, fn in _installed.items():
        if ns.get(ident) is fn:  # unless the user rebound the name
            del ns[ident]
    _installed.clear()
    del _pending[:]
    _limits.update(spec.get("limits", {}))
    for t in spec["tools"]:
        fn = _make_tool(t["name"], t["ident"], t.get("description"), t.get("input_schema"))
        ns[t["ident"]] = fn
        _installed[t["ident"]] = fn
