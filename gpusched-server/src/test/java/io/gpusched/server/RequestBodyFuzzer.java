package io.gpusched.server;

import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import java.nio.charset.StandardCharsets;

/**
 * Fuzz target for the console's and the node socket's request-body reader, {@code AllocationsHandler.parseRequest}
 * (the body of {@code POST /api/v1/allocations}, bytes as they came). Contract: it returns a request, or throws
 * {@link IllegalArgumentException} or a {@link GpuException} (both answered 400) with a message; nothing else (no
 * Jackson exception, no {@code NullPointerException}, no {@code StackOverflowError} from deep nesting), never a
 * request for no GPU. Standalone entry point for {@code .ci/fuzz} ({@code fuzzerTestOneInput}); {@link
 * RequestBodyFuzzTest} runs it under JUnit.
 */
public final class RequestBodyFuzzer {
    private RequestBodyFuzzer() {
    }

    /** One input: a request body. */
    public static void fuzzerTestOneInput(byte[] input) {
        GpuRequest r;
        try {
            r = AllocationsHandler.parseRequest(input);
        } catch (IllegalArgumentException | GpuException e) {
            if (e.getMessage() == null || e.getMessage().isBlank()) {
                throw new AssertionError("refusal without a message for " + show(input), e);
            }
            return;
        } catch (RuntimeException | StackOverflowError e) {
            throw new AssertionError("undocumented " + e.getClass().getName() + " for " + show(input), e);
        }
        if (r == null || r.count() < 1) {
            throw new AssertionError("accepted a request for no GPU: " + r + " from " + show(input));
        }
    }

    private static String show(byte[] input) {
        String s = new String(input, StandardCharsets.UTF_8);
        return '"' + (s.length() > 200 ? s.substring(0, 200) + "..." : s) + '"';
    }
}
