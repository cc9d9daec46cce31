/**
 * Test fixtures shared by every module's tests, in a module of their own (gpusched-testing, test scope, never
 * published) that depends on no gpusched module, so that gpu-core's own tests can use them too:
 * {@link io.gpusched.testing.ManualClock}, a clock tests move by hand, {@link io.gpusched.testing.LedgerReader},
 * an independent reader of the node ledger's file by its documented format (a checker: it shares no code with the
 * ledger it checks), and {@link io.gpusched.testing.ClassPathEntry}, class-path entries known by artifact and classes
 * (never by the words in their paths) for tests that build another JVM's class path, and
 * {@link io.gpusched.testing.FsyncShim}, the durability tests' LD_PRELOAD shim that logs writes, forces and
 * acknowledgments, and {@link io.gpusched.testing.ChildOutput}, a child process's output read to its end when the test
 * kills it with SIGKILL (what the child acknowledged before it died is not dropped).
 */
package io.gpusched.testing;
