package io.gpusched.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

/**
 * Fuzz target for the client's answer parser: raw bytes as the node service's socket would deliver them (the first
 * byte sets how many bytes each read returns, so framing is cut at every place), read by {@link Answer} (status line,
 * headers, Content-Length/chunked/to-the-end body, stream lines, a paged list's {@code Link rel="next"}) and then by
 * {@link Replies} into every value of the contract, or, for an error status, into the typed exception. The contract: a {@link NodeServiceException} naming the
 * socket for anything that is not the service's protocol, the library's typed exceptions for error answers
 * ({@link GpuAllocationException}, {@link AccessDeniedException}, {@link LedgerException}, exactly
 * {@link IllegalArgumentException} for a 400 without a reason), never any other exception, never a hang, never more
 * than the limits' memory.
 */
public final class AnswerFuzzer {
    private static final Path SOCKET = Path.of("/run/gpusched/fuzz.sock");

    private AnswerFuzzer() {
    }

    /** One input: the answer's bytes, after one byte giving the read size. */
    public static void fuzzerTestOneInput(byte[] input) {
        int chunk = input.length == 0 ? 1 : 1 + (input[0] & 0x3f);
        byte[] answer = input.length == 0 ? input : Arrays.copyOfRange(input, 1, input.length);
        ByteSource src = source(answer, chunk);
        Answer a;
        try {
            a = Answer.read(src, SOCKET);
        } catch (NodeServiceException e) {
            named(e);
            return;
        } catch (IOException e) {
            throw new AssertionError("an IOException from a byte array: " + e, e);
        }
        Replies r = new Replies(SOCKET, "GET /fuzz");
        String link = a.header("link");
        if (link != null) {
            try {
                String next = ServiceClient.next(link, r);
                if (next != null) {
                    String target = ServiceClient.sameList(next, "/api/v1/allocations", r);
                    if (!target.startsWith("/api/v1/allocations?") || target.chars().anyMatch(c -> c <= ' ')) {
                        throw new AssertionError("a next page elsewhere was followed: " + target);
                    }
                }
            } catch (NodeServiceException e) {
                named(e);
            }
        }
        byte[] body;
        try {
            body = a.body(256 * 1024);
        } catch (NodeServiceException e) {
            named(e);
            return;
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        if (a.status() < 200 || a.status() >= 300) {
            RuntimeException e = r.error(a.status(), body, "read", "x");
            boolean typed = e instanceof GpuAllocationException || e instanceof AccessDeniedException
                    || e instanceof LedgerException || e.getClass() == IllegalArgumentException.class
                    || e instanceof NodeServiceException;
            if (!typed || e.getMessage() == null) {
                throw new AssertionError("an error answer became " + e.getClass().getName() + ": " + e.getMessage());
            }
            return;
        }
        JsonNode n;
        try {
            n = r.json().parse(body);
        } catch (NodeServiceException e) {
            named(e);
            lines(answer, chunk);
            return;
        }
        List<Consumer<JsonNode>> readers = List.of(r::node, r::devices, r::allocation, r::allocations, r::job,
                r::jobs, r::topology, r::queue, r::identity, x -> r.environment(x, "a-1"), r::holdersTotal);
        for (Consumer<JsonNode> reader : readers) {
            try {
                reader.accept(n);
            } catch (NodeServiceException e) {
                named(e);
            }
        }
        lines(answer, chunk);
    }

    /** The same bytes read as a stream of lines (an attached job's, an event stream's). */
    private static void lines(byte[] answer, int chunk) {
        try {
            Answer a = Answer.read(source(answer, chunk), SOCKET);
            for (int i = 0; i < 10_000 && a.line(4096) != null; i++) {
                // read to the end, a bounded line at a time
            }
        } catch (NodeServiceException e) {
            named(e);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static void named(NodeServiceException e) {
        if (e.getMessage() == null || !e.getMessage().contains(SOCKET.toString())) {
            throw new AssertionError("a NodeServiceException that does not name the socket: " + e.getMessage(), e);
        }
    }

    private static ByteSource source(byte[] bytes, int chunk) {
        int[] pos = {0};
        return (b, off, len) -> {
            if (pos[0] >= bytes.length) {
                return -1;
            }
            int n = Math.min(Math.min(len, chunk), bytes.length - pos[0]);
            System.arraycopy(bytes, pos[0], b, off, n);
            pos[0] += n;
            return n;
        };
    }
}
