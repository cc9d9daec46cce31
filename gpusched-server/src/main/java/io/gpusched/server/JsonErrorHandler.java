package io.gpusched.server;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.http.HttpFields;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.http.HttpStatus;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.handler.ErrorHandler;
import org.eclipse.jetty.util.Callback;

/**
 * Errors Jetty answers itself (a request it cannot parse, headers over the limit, a URI it refuses) in the console's
 * JSON shape, {@code {"status": N, "error": "sentence"}}, whatever the client accepts; never a stack or an HTML page.
 */
final class JsonErrorHandler extends ErrorHandler {
    JsonErrorHandler() {
        setShowStacks(false);
        setShowCauses(false);
    }

    @Override
    protected boolean generateAcceptableResponse(Request request, Response response, Callback callback,
            String contentType, List<Charset> charsets, int code, String message, Throwable cause)
            throws IOException {
        return super.generateAcceptableResponse(request, response, callback, "application/json",
                List.of(StandardCharsets.UTF_8), code, message, cause);
    }

    @Override
    protected void writeErrorJson(Request request, PrintWriter writer, int code, String message, Throwable cause) {
        writer.write(body(code, message));
    }

    @Override
    public ByteBuffer badMessageError(int status, String reason, HttpFields.Mutable fields) {
        fields.put(HttpHeader.CONTENT_TYPE, "application/json");
        return ByteBuffer.wrap(body(status, reason).getBytes(StandardCharsets.UTF_8));
    }

    /** @return the console's error body for a status and Jetty's reason (or the status's own words) */
    static String body(int code, String message) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", code);
        String words = message == null || message.isBlank() ? HttpStatus.getMessage(code) : message;
        m.put("error", SampleHistory.printable(words));
        return Views.json(m);
    }
}
