package io.gpusched.server;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.net.httpserver.HttpServer;
import java.lang.reflect.Field;
import java.util.Set;

/**
 * Reads the JDK server's own count of connection records: the {@code allConnections} set of the
 * {@code sun.net.httpserver.ServerImpl} behind an {@code HttpServer} (field {@code server} of the
 * {@code HttpServerImpl} wrapper). An independent view: the console's own counters are not asked. Needs
 * {@code --add-opens jdk.httpserver/sun.net.httpserver=ALL-UNNAMED} (set in this module's surefire argLine); where
 * reflection is refused or the JDK's fields differ, the test is skipped with the reason.
 */
final class JdkConnections {
    private final Set<?> all;

    private JdkConnections(Set<?> all) {
        this.all = all;
    }

    /** @return a reader of the records of this console's server, or the test is skipped with the reason */
    static JdkConnections of(ConsoleServer console) {
        HttpServer wrapper = console.httpServer();
        try {
            Field server = wrapper.getClass().getDeclaredField("server");
            server.setAccessible(true);
            Object impl = server.get(wrapper);
            Field all = impl.getClass().getDeclaredField("allConnections");
            all.setAccessible(true);
            Object set = all.get(impl);
            assumeTrue(set instanceof Set<?>, "ServerImpl.allConnections is not a Set on this JDK ("
                    + System.getProperty("java.version") + "): " + (set == null ? null : set.getClass()));
            return new JdkConnections((Set<?>) set);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // InaccessibleObjectException (no --add-opens), NoSuchFieldException (another JDK's internals)
            assumeTrue(false, "cannot read the JDK server's connection records on "
                    + System.getProperty("java.vm.vendor") + " " + System.getProperty("java.version")
                    + " (needs --add-opens jdk.httpserver/sun.net.httpserver=ALL-UNNAMED and JDK 17-style"
                    + " HttpServerImpl.server / ServerImpl.allConnections fields): " + e);
            throw new AssertionError(e); // not reached
        }
    }

    /** @return connection records the JDK server holds now */
    int count() {
        synchronized (all) { // a synchronized set in JDK 17
            return all.size();
        }
    }

    /**
     * Waits until the server holds {@code expected} records; fails with the count seen when it does not come back to
     * it within 30 s (a hang guard: the removal happens on the server's own threads, right after a stream ends).
     */
    void awaitCount(int expected, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        int n;
        while ((n = count()) != expected) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the JDK server still holds " + n + " connection records " + what
                        + "; expected " + expected + " (the connections still open)");
            }
            Thread.sleep(20);
        }
    }
}
