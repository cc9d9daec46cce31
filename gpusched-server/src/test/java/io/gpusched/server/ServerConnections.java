package io.gpusched.server;

/**
 * The connections the console's server holds open on TCP, as Jetty's connector records them (its set of connected
 * end points): a connection the server forgot is gone from it.
 */
final class ServerConnections {
    private final ConsoleServer console;

    private ServerConnections(ConsoleServer console) {
        this.console = console;
    }

    /** @return a reader of the connections of this console's server */
    static ServerConnections of(ConsoleServer console) {
        return new ServerConnections(console);
    }

    /** @return connections the server holds now */
    int count() {
        return console.transport().tcpConnections();
    }

    /**
     * Waits until the server holds {@code expected} connections; fails with the count seen when it does not come back
     * to it within 30 s (a hang guard: the removal happens on the server's own threads, right after a stream ends).
     */
    void awaitCount(int expected, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        int n;
        while ((n = count()) != expected) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the server still holds " + n + " connections " + what + "; expected "
                        + expected + " (the connections still open)");
            }
            Thread.sleep(20);
        }
    }
}
