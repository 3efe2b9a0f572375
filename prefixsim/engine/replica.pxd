# Types of replica.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): Replica extends the extension type ReplicaMemory (replica_memory.pxd) with the
# queue's and the step loop's state as C fields; the methods of a step's bookkeeping are
# typed. The step loop's generators stay Python-called (simpy resumes them).
cimport cython
from prefixsim.engine.decode_steps cimport RunClock
from prefixsim.engine.replica_memory cimport ReplicaMemory
from prefixsim.engine.request_state cimport RequestState
from prefixsim.engine.state_log cimport StateLog


cdef class Replica(ReplicaMemory):
    cdef public object load_board
    cdef public Py_ssize_t load_slot
    cdef public list _board_lows
    cdef public list _board_highs
    cdef public object _run_state
    cdef public object transfer
    cdef public list handing_off
    cdef public Py_ssize_t index
    cdef public object scheduler
    cdef public object on_finish
    cdef public bint check
    cdef public object max_run_steps
    cdef public StateLog state_log
    cdef public long long num_steps
    cdef public double busy_s
    cdef public object itl_segments
    cdef public object _wake
    cdef public bint _defers
    cdef public list _run_decodes
    cdef public long long _covered
    cdef public double due_s
    cdef public object catch_ups
    cdef public double _idle_wakeup_s
    cdef public object process

    cpdef _change_load(self, long long tokens)

    cpdef _set_run(self, object run)

    @cython.locals(outstanding=cython.longlong, slot=Py_ssize_t, clock=RunClock)
    cpdef _post_load(self)

    cpdef tuple state_row(self)

    cpdef log_state(self, StateLog log)

    @cython.locals(elapsed=cython.double, done=cython.longlong, clock=RunClock,
                   start=cython.double)
    cpdef long long load_at(self, double now) except? -1

    @cython.locals(outstanding=cython.longlong, clock=RunClock)
    cpdef tuple load_bounds(self)

    @cython.locals(clock=RunClock, start=cython.double)
    cpdef long long least_load_at(self, double now) except? -1

    @cython.locals(was_empty=bint, tokens=cython.longlong)
    cpdef submit(self, RequestState state)

    cpdef _finish(self, RequestState state)

    @cython.locals(state=RequestState, s=RequestState)
    cpdef _finish_done(self)

    cpdef _hand_off(self, RequestState state)

    cpdef _after_step(self)

    cpdef object _plan(self)

    @cython.locals(decodes=list, s=RequestState, state=RequestState, step_s=cython.double,
                   loads=list)
    cpdef double _start_prefill_step(self, object plan) except? -1.0

    @cython.locals(now=cython.double, state=RequestState, num_tokens=cython.longlong,
                   resumed=bint, decodes=list)
    cpdef _end_prefill_step(self, object plan, double step_s)

    @cython.locals(s=RequestState, remaining=cython.longlong, steps=cython.longlong,
                   covered=cython.longlong, total_s=cython.double, start=cython.double)
    cpdef tuple _start_decode_run(self, list decodes)

    @cython.locals(num=Py_ssize_t, unused=cython.longlong, state=RequestState,
                   now=cython.double)
    cpdef _end_decode_run(self, list decodes, long long done, long long covered,
                          double total_s, list gaps)

    @cython.locals(target=cython.longlong, covered=cython.longlong, clock=RunClock,
                   start=cython.double)
    cpdef catch_up(self, double tie_s=*)

    cpdef _due(self, double due_s)
