package io.gpusched.service;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.server.Caller;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's audit: one JSON line per request that changes something or is refused, appended to
 * {@code <state dir>/audit.log} (mode 0600, root's): when, the caller's uid and user name (from the kernel's peer
 * credentials), the action, its subject, the request and the result ({@code ok}, or the refusal's reason and
 * sentence). Reads that succeed are not audited. Lines are written whole with one {@code write} on a file opened for
 * appending, flushed to the kernel (not forced to disk: the ledger is the durable record of what was granted; the
 * audit is who asked). Over {@link #MAX_BYTES} the file is renamed to {@code audit.log.1} (replacing the previous one)
 * and a new one begun. Every line also goes to the log at INFO ({@code io.gpusched.service.audit}). Once closed, the
 * file is never opened again: a request that ends after the service closed (a waiter its close cancelled) goes to the
 * log only, not into a state directory a successor may already hold.
 */
final class AuditLog implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger("io.gpusched.service.audit");
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Size at which the file is rotated. */
    static final long MAX_BYTES = 64L << 20;
    /** Longest text of one field kept in a line. */
    static final int MAX_FIELD = 2048;

    private final Path file;
    private final Clock clock;
    private FileChannel out;
    private boolean closed;

    AuditLog(Path file, Clock clock) {
        this.file = file;
        this.clock = clock;
    }

    /** @return the audit file */
    Path file() {
        return file;
    }

    /**
     * Appends one line.
     *
     * @param caller  who asked
     * @param action  what ({@code allocate}, {@code release}, {@code job.start}, ...)
     * @param subject on what (an allocation or job id, a GPU index; may be null)
     * @param request what was asked, in short (may be null)
     * @param result  {@code ok} or the refusal's reason code
     * @param detail  the result's sentence or the new thing's id (may be null)
     */
    synchronized void record(Caller caller, String action, String subject, String request, String result,
            String detail) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("at", clock.instant().toString());
        m.put("uid", caller.uid());
        m.put("user", clip(caller.user()));
        m.put("admin", caller.admin());
        m.put("action", action);
        if (subject != null) {
            m.put("subject", clip(subject));
        }
        if (request != null) {
            m.put("request", clip(request));
        }
        m.put("result", result);
        if (detail != null) {
            m.put("detail", clip(detail));
        }
        String line;
        try {
            line = JSON.writeValueAsString(m) + "\n";
        } catch (JsonProcessingException e) {
            line = "{\"action\":\"" + action + "\",\"error\":\"unencodable\"}\n";
        }
        LOG.info("{}", line.strip());
        if (closed) {
            return;
        }
        try {
            open();
            if (out.size() > MAX_BYTES) {
                out.close();
                out = null;
                Files.move(file, file.resolveSibling(file.getFileName() + ".1"), StandardCopyOption.REPLACE_EXISTING);
                open();
            }
            ByteBuffer b = ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8));
            while (b.hasRemaining()) {
                out.write(b);
            }
        } catch (IOException e) {
            LOG.warn("cannot append to the audit file {}: {}", file, e.toString());
            closeQuietly();
        }
    }

    private void open() throws IOException {
        if (out != null) {
            return;
        }
        if (Files.isSymbolicLink(file) || (Files.exists(file, LinkOption.NOFOLLOW_LINKS)
                && !Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS))) {
            throw new IOException(file + " is not a regular file; the audit is not written there");
        }
        out = FileChannel.open(file, Set.of(StandardOpenOption.CREATE, StandardOpenOption.APPEND,
                StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    }

    private static String clip(String s) {
        return s.length() > MAX_FIELD ? s.substring(0, MAX_FIELD) + "...(" + s.length() + " chars)" : s;
    }

    private void closeQuietly() {
        if (out != null) {
            try {
                out.close();
            } catch (IOException ignored) {
                // closing a broken file
            }
            out = null;
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        closeQuietly();
    }
}
