// Clang's thread-safety attributes as macros: which lock guards a field, which a
// function needs or takes. Empty on compilers without them (g++); checked by
// `make check-thread-safety` (clang -Wthread-safety, docs/testing.md).
#pragma once

#if defined(__clang__)
#define MANYPY_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define MANYPY_THREAD_ATTRIBUTE(x)
#endif

// Abseil (through gRPC) defines some of these names with the same attributes:
// whichever header comes first wins, with the same meaning.
#ifndef GUARDED_BY
#define GUARDED_BY(x) MANYPY_THREAD_ATTRIBUTE(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) MANYPY_THREAD_ATTRIBUTE(pt_guarded_by(x))
#endif
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS MANYPY_THREAD_ATTRIBUTE(no_thread_safety_analysis)
#endif

/// A type that is a lock (Mutex).
#define CAPABILITY(x) MANYPY_THREAD_ATTRIBUTE(capability(x))
/// A type whose constructor takes a lock and whose destructor gives it back (MutexLock).
#define SCOPED_CAPABILITY MANYPY_THREAD_ATTRIBUTE(scoped_lockable)
/// The caller must hold these locks (exclusively / at least shared).
#define REQUIRES(...) MANYPY_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) MANYPY_THREAD_ATTRIBUTE(requires_shared_capability(__VA_ARGS__))
/// The caller must not hold these locks (the function takes them).
#define EXCLUDES(...) MANYPY_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
/// The function takes / gives back these locks (none named: the object itself).
#define ACQUIRE(...) MANYPY_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) MANYPY_THREAD_ATTRIBUTE(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) MANYPY_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) MANYPY_THREAD_ATTRIBUTE(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) MANYPY_THREAD_ATTRIBUTE(release_generic_capability(__VA_ARGS__))
/// The function returns a reference to this lock (an accessor).
#define RETURN_CAPABILITY(x) MANYPY_THREAD_ATTRIBUTE(lock_returned(x))
/// The function checks that the lock is held (the analysis then assumes it is).
#define ASSERT_CAPABILITY(x) MANYPY_THREAD_ATTRIBUTE(assert_capability(x))
