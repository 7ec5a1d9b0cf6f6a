# A trace function (sys.settrace) that rewrites the runner's frames: every
# call with an `outcome` argument gets "pass", written back into the frame
# with ctypes (PyFrame_LocalsToFast).
@_once
def _attack():
    import ctypes
    import threading
    def tracer(frame, event, arg):
        code = frame.f_code
        if event == "call" and "outcome" in code.co_varnames[: code.co_argcount]:
            frame.f_locals["outcome"] = "pass"
            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
        return None
    _sys.settrace(tracer)
    threading.settrace(tracer)
