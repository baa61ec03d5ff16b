// libtorch's one Python interpreter (PyTorch >= 2.9), owned by the host: it hands each
// call to the interpreter that made the object. Thread-safe; callable with or without any
// GIL, and it never waits for a GIL while the calling thread holds another one.
#pragma once

#include "common/status.h"

// From 2.9 on libtorch calls Python through one process-global
// c10::impl::PyInterpreter (c10/core/impl/PyInterpreterHooks.h:37), the first
// "PyInterpreterHooks" registered, where 1.9..2.8 tagged every TensorImpl
// with the interpreter that wrapped it. Every libtorch_python copy registers
// its own at the default priority, and a second copy's registration ends the
// process (c10/util/Registry.h:88-89). So the host registers first, at
// REGISTRY_PREFERRED: the copies' registrations are then skipped, and this
// component's PyInterpreter routes every PyInterpreterVTable method
// (c10/core/impl/PyInterpreter.h:125-228):
//  - per object (incref, decref, try_incref, refcnt, detach, sizes, ...): to
//    the interpreter whose runtime made the object. Its type's metatype chain
//    ends at that runtime's own PyType_Type, read with CPython's object header
//    alone (ob_type after ob_refcnt), so no GIL is needed to find the owner;
//  - per call (dispatch, python_dispatcher, the op-registration trampoline,
//    GPU tracing): a TorchDispatchMode's interpreter, else the interpreter of
//    the first argument that has a Python object, else the calling thread's
//    (python_kernels.h decides the same way for Python kernels).
// The chosen copy's own PyInterpreter (getPyInterpreter()) then runs the call
// under its own GIL, as on 2.8.
//
// The rule that makes it safe: a TensorImpl, StorageImpl or autograd Node is
// wrapped by at most one interpreter (one PyObjectSlot holds one object and
// says nothing of whose, c10/core/impl/PyObjectSlot.h:68). Every boundary
// gives each interpreter its own TensorImpl and StorageImpl over the same
// bytes (shim/python_convert.cc); the shim refuses to wrap one another
// interpreter has wrapped, and GlobalPyInterpreterStats().cross_increfs
// counts what slipped through (a debug build aborts on one). The operators'
// Python objects, which 2.14 caches per operator for the whole process
// (c10/core/PyHandleCache.h:40-59), are cached per interpreter instead
// (shim/torch_api_function.h).
//
// GIL order (no deadlock when one interpreter's thread drops another's
// object): a thread never waits for a second GIL while it holds one.
//  - decref of interpreter B's object on a thread holding A's GIL is not done
//    in place: it is queued for B (a mutex, never a GIL) and the host's
//    decref thread, which holds no GIL, drops it taking B's GIL alone. A
//    decref delayed keeps the object alive a little longer, never too short.
//    (Py_AddPendingCall is no way out: CPython runs pending calls of the main
//    interpreter only on its main thread, here the interpreter's owner
//    thread, which runs no Python while it waits.)
//  - anything else of B's (incref, a size query, ...) cannot be delayed: the
//    thread lets A's GIL go, takes B's, and takes A's again afterwards
//    ("steps out", as Py_BEGIN_ALLOW_THREADS does). The one-wrapper rule
//    makes this unreachable through manypy's own boundaries.
//  - a thread holding no GIL, or B's, calls B's copy directly.

namespace manypy {

/// What Interpreter::Boot reports of an interpreter (from its libpython copy
/// and its shim, before its Python starts) so that its objects can be routed
/// to it. Plain function pointers into that interpreter's own library copies.
struct GlobalInterpreterMember {
  const void* type_type = nullptr;       ///< its libpython's PyType_Type
  const void* py_interpreter = nullptr;  ///< its libtorch_python's c10::impl::PyInterpreter
  int (*thread_state)() = nullptr;       ///< 2: the caller holds its GIL; 1: a state only; 0: none
  void* (*save_thread)() = nullptr;      ///< PyEval_SaveThread of its runtime
  void (*restore_thread)(void* state) = nullptr;  ///< PyEval_RestoreThread
};

/// Registers the host's PyInterpreterHooks, once per process (later calls
/// check it is still the one). Must precede the first copy of libtorch_python
/// (Interpreter::Start calls it before loading one). FailedPrecondition when
/// libtorch already answers with another interpreter (something loaded
/// libtorch_python or asked for the global interpreter first).
Status InstallGlobalPyInterpreter();

/// Adds an interpreter; false when the table is full. Call before the
/// interpreter makes any object.
bool JoinGlobalPyInterpreter(const GlobalInterpreterMember& member);

/// Before the interpreter whose copy is `py_interpreter` finalizes (on its
/// owner thread, holding no GIL): drops what was queued for it; later decrefs
/// of its objects go to its copy, which drops nothing once it is finalized.
void LeaveGlobalPyInterpreter(const void* py_interpreter);

/// The libtorch_python copy's PyInterpreter of the interpreter that made
/// `pyobject` (a PyObject*), or null when no member made it.
const void* OwnerPyInterpreter(const void* pyobject);

struct GlobalPyInterpreterCounts {
  long routed = 0;            ///< calls handed to a member's copy
  long deferred_decrefs = 0;  ///< decrefs queued for their owner (another GIL was held)
  long stepped_out = 0;       ///< calls made after letting the caller's GIL go
  long cross_increfs = 0;     ///< increfs of B's object on a thread holding A's GIL
};
GlobalPyInterpreterCounts GlobalPyInterpreterStats();

}  // namespace manypy
