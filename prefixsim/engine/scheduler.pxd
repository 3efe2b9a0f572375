# Types of scheduler.py (Cython's pure-Python mode; docs/architecture.md "Compiled hot
# modules"): the step planner's loop reads its requests as typed RequestStates
# (request_state.pxd) and counts its budget in C.
cimport cython
from prefixsim.engine.request_state cimport RequestState


@cython.locals(budget=cython.longlong, decodes=list, chunks=list, starved=bint,
               state=RequestState, s=RequestState, size=cython.longlong)
cpdef object plan_step(long long max_batched_tokens, long long max_num_seqs,
                       bint chunked_prefill, list running, object waiting, object admit,
                       object grow)
