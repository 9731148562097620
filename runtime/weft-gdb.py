# runtime/weft-gdb.py - gdb commands for weft's light threads.
#
# Load it with   (gdb) source /usr/share/weft/weft-gdb.py   (or the copy in
# the source tree's runtime/). It needs libweft's debug information (the
# default build has -g).
#
#   weft threads        list every light thread: handle, name, state, what
#                       it waits on, its worker (the TCBs of every slab that
#                       are not free; the slabs live for the whole process)
#   weft bt THREAD      backtrace of a parked or runnable light thread, by
#                       handle (0x...) or by name: the registers of the
#                       selected OS thread are pointed at the light thread's
#                       saved context (stack pointer, resume address, frame
#                       pointer) for the backtrace and restored after. Works
#                       on a live process (not on a core file, whose
#                       registers gdb cannot change). A running thread's
#                       stack is the OS thread it runs on: use "thread N; bt".
#
# The saved context is struct wft_ctx (runtime/context_*.h): x86-64 keeps
# sp, pc and fp (rbp); aarch64 keeps sp, pc (the resume address) and fp
# (x29). The ucontext build is not supported.

import gdb

STATES = {0: "new", 1: "runnable", 2: "running", 3: "parked", 4: "exited",
          5: "parked (join)"}
JS_FREE = 5        # WFT_J_FREE (runtime/thread.h)
JS_DETACHED = 3
JS_EXITED = 4


def _tcbs():
    """Yield every TCB (gdb.Value of struct weft_thread) in use."""
    try:
        slab = gdb.parse_and_eval("slabs")
    except gdb.error as e:
        raise gdb.GdbError("weft: no symbol 'slabs' (is libweft loaded, with "
                           "debug info?): %s" % e)
    while int(slab) != 0:
        tcbs = slab["tcbs"]
        lo, hi = tcbs.type.range()
        for i in range(lo, hi + 1):
            t = tcbs[i]
            js = int(t["jstate"])
            if (js & 6) != 0 and (js & 7) == JS_FREE:
                continue
            yield t
        slab = slab["next"]


def _name(t):
    try:
        return t["name"].string()
    except gdb.error:
        return "?"


def _waits(t):
    what = int(t["wait_what"])
    if what == 0:
        return ""
    s = " on " + t["wait_what"].string()
    obj = int(t["wait_obj"])
    if obj:
        if t["wait_what"].string() == "sync":
            s += " (called from %s)" % gdb.execute("info symbol 0x%x" % obj,
                                                     to_string=True).strip()
        else:
            s += " 0x%x" % obj
    return s


def _find(arg):
    arg = arg.strip()
    if not arg:
        raise gdb.GdbError("usage: weft bt THREAD (handle or name)")
    want = None
    try:
        want = int(gdb.parse_and_eval(arg))
    except gdb.error:
        pass
    for t in _tcbs():
        if want is not None and int(t.address) == want:
            return t
        if _name(t) == arg:
            return t
    raise gdb.GdbError("weft: no light thread %s" % arg)


class WeftPrefix(gdb.Command):
    """weft: commands for weft light threads (weft threads, weft bt)."""

    def __init__(self):
        super().__init__("weft", gdb.COMMAND_USER, prefix=True)


class WeftThreads(gdb.Command):
    """List the light threads: weft threads"""

    def __init__(self):
        super().__init__("weft threads", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        n = 0
        for t in _tcbs():
            js = int(t["jstate"])
            st = int(t["state"])
            w = t["worker"]
            wid = int(w["id"]) if int(w) != 0 else -1
            extra = ""
            if (js & 6) != 0 and (js & 7) == JS_DETACHED:
                extra = ", detached"
            elif (js & 6) != 0 and (js & 7) == JS_EXITED:
                extra = ", not joined"
            gdb.write("  0x%x \"%s\" %s%s, worker %d%s\n" % (
                int(t.address), _name(t), STATES.get(st, "?"), _waits(t), wid, extra))
            n += 1
        gdb.write("%d light thread%s\n" % (n, "" if n == 1 else "s"))


class WeftBt(gdb.Command):
    """Backtrace of a parked light thread: weft bt THREAD (handle or name)"""

    def __init__(self):
        super().__init__("weft bt", gdb.COMMAND_USER)

    def invoke(self, arg, from_tty):
        t = _find(arg)
        st = int(t["state"])
        if st == 2:
            raise gdb.GdbError("weft: %s is running: select its worker's OS thread "
                               "(info threads; thread N) and use bt" % arg)
        if int(t["started"]) == 0:
            raise gdb.GdbError("weft: %s has not run yet: no stack" % arg)
        ctx = t["ctx"]
        arch = gdb.selected_frame().architecture().name()
        if "x86-64" in arch:
            regs = ("$rsp", "$pc", "$rbp")
        elif "aarch64" in arch:
            regs = ("$sp", "$pc", "$x29")
        else:
            raise gdb.GdbError("weft: unsupported architecture %s" % arch)
        gdb.execute("select-frame 0", to_string=True)
        saved = [int(gdb.parse_and_eval(r)) for r in regs]
        vals = [int(ctx["sp"]), int(ctx["pc"]), int(ctx["fp"])]
        gdb.write("light thread 0x%x \"%s\" (%s):\n" % (int(t.address), _name(t),
                                                         STATES.get(st, "?")))
        try:
            for r, v in zip(regs, vals):
                gdb.execute("set %s = 0x%x" % (r, v), to_string=True)
            gdb.execute("bt")
        finally:
            for r, v in zip(regs, saved):
                gdb.execute("set %s = 0x%x" % (r, v), to_string=True)


WeftPrefix()
WeftThreads()
WeftBt()
