package io.gpusched.service;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.function.BooleanSupplier;
import org.eclipse.jetty.http.spi.JettyHttpExchange;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.util.BufferUtil;

/**
 * Whether the client of a request that waits (in the fair queue) is still there. A client that waits for an answer
 * sends nothing more, so the connection is read for one byte without blocking: end of stream means the client closed
 * it (or was killed: the kernel closes its sockets). Read only while the request waits, never while the console reads
 * it; a byte that does arrive (a client pipelining a next request, which a waiting client does not do) is taken as
 * "still there".
 */
final class ClientWatch {
    private ClientWatch() {
    }

    /** @return for this exchange, whether its client has gone (never, when the transport cannot tell) */
    static BooleanSupplier of(HttpExchange ex) {
        EndPoint e = ex instanceof JettyHttpExchange j ? j.getRequest().getConnectionMetaData().getConnection()
                .getEndPoint() : null;
        if (e == null) {
            return () -> false;
        }
        return () -> {
            if (!e.isOpen() || e.isInputShutdown()) {
                return true;
            }
            try {
                ByteBuffer b = BufferUtil.allocate(1);
                return e.fill(b) < 0;
            } catch (IOException gone) {
                return true;
            }
        };
    }
}
