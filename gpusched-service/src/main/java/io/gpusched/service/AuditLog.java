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
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's audit: one JSON line per request that changes something or is refused, appended to
 * {@code <state dir>/audit.log} (mode 0600, root's): when, the caller's uid and user name (from the kernel's peer
 * credentials), the action, its subject, the request and the result ({@code ok}, or the refusal's reason and
 * sentence). Reads that succeed are not audited. Lines are written whole with one {@code write} on a file opened for
 * appending, flushed to the kernel (not forced to disk: the ledger is the durable record of what was granted; the
 * audit is who asked). Over {@link #MAX_BYTES} the file is renamed to {@code audit.log.1} (replacing the previous one)
 * and a new one begun. Every line also goes to the log at INFO ({@code io.gpusched.service.audit}).
 *
 * <p>Refusals are itemized up to {@link #REFUSAL_BURST} at once per uid, then {@link #REFUSAL_RATE} a second: past
 * that, a flood of one user's refused requests (each costs the service little, and a line may be kilobytes) would
 * otherwise rotate everyone's audit away in minutes. A refusal not itemized is counted, by action and reason, and the
 * count (with the first subject of each kind) goes into one {@code audit.suppressed} line of that uid: written before
 * that uid's next itemized line, after a minute (a timer looks every second), or at close. Refusals {@code FORBIDDEN}
 * (an attempt on what another user holds) have a budget of their own, so a flood of harmless refusals just before
 * cannot turn such an attempt into a count. Changes ({@code ok}) are always itemized. Once closed,
 * the file is never opened again: a request that ends after the service closed (a waiter its close cancelled) goes to
 * the log only, not into a state directory a successor may already hold.
 */
final class AuditLog implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger("io.gpusched.service.audit");
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Size at which the file is rotated. */
    static final long MAX_BYTES = 64L << 20;
    /** Longest text of one field kept in a line. */
    static final int MAX_FIELD = 2048;

    /** Refusals of one uid itemized at once before they are counted instead. */
    static final int REFUSAL_BURST = 100;
    /** Refusals a second of one uid itemized once its burst is spent. */
    static final double REFUSAL_RATE = 1.0;
    /** How long refusals are counted before their count is written. */
    static final Duration SUMMARY_AFTER = Duration.ofMinutes(1);
    /** Distinct action and reason pairs named in one count line; the rest are summed as "other". */
    private static final int MAX_KINDS = 16;

    private final Path file;
    private final Clock clock;
    /**
     * Refusal budgets by uid and kind: {@code uid * 2 + 1} for {@code FORBIDDEN} (an attempt on what another user
     * holds), {@code uid * 2} for the rest, so harmless refusals cannot spend the budget that keeps such attempts
     * itemized.
     */
    private final Map<Long, Budget> budgets = new HashMap<>();
    private final ScheduledExecutorService timer;
    /** How long refusals are counted before their count is written (a test shortens it). */
    static volatile Duration summaryAfter = SUMMARY_AFTER;
    private Instant lastSweep = Instant.EPOCH;
    private FileChannel out;
    private boolean closed;

    /** One uid's refusals: the tokens left, and those counted since {@link #since}. */
    private static final class Budget {
        double tokens = REFUSAL_BURST;
        Instant filled;
        Caller caller;
        long counted;
        Instant since;
        Instant last;
        final Map<String, Long> kinds = new TreeMap<>();
        /** The first subject (an allocation, a job) of each kind counted, so a probe is not lost in a flood. */
        final Map<String, String> firstSubject = new HashMap<>();

        Budget(Instant now) {
            filled = now;
        }

        void refill(Instant now) {
            double seconds = Math.max(0, Duration.between(filled, now).toNanos() / 1e9);
            tokens = Math.min(REFUSAL_BURST, tokens + seconds * REFUSAL_RATE);
            filled = now;
        }
    }

    /** An audit whose counts older than {@link #summaryAfter} are written on its next line (tests: no timer). */
    AuditLog(Path file, Clock clock) {
        this(file, clock, false);
    }

    /**
     * @param timer whether a timer of its own writes the counts older than {@link #summaryAfter} (every second), so a
     *              count reaches the file on a quiet node too, not only with the next line someone's request makes
     */
    AuditLog(Path file, Clock clock, boolean timer) {
        this.file = file;
        this.clock = clock;
        if (timer) {
            this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "gpusched-audit-counts");
                t.setDaemon(true);
                return t;
            });
            this.timer.scheduleWithFixedDelay(this::writeDueCounts, 1, 1, TimeUnit.SECONDS);
        } else {
            this.timer = null;
        }
    }

    private synchronized void writeDueCounts() {
        if (!closed) {
            lastSweep = Instant.EPOCH;
            sweep(clock.instant());
        }
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
        Instant now = clock.instant();
        boolean refusal = !"ok".equals(result);
        long key = caller.uid() * 2 + ("FORBIDDEN".equals(result) ? 1 : 0);
        Budget budget = budgets.get(key);
        if (budget == null && refusal) {
            budget = new Budget(now);
            budgets.put(key, budget);
        }
        if (budget != null) {
            budget.refill(now);
            if (refusal && budget.tokens < 1) {
                budget.caller = caller;
                budget.counted++;
                budget.since = budget.since == null ? now : budget.since;
                budget.last = now;
                String kind = action + " " + result;
                kind = budget.kinds.containsKey(kind) || budget.kinds.size() < MAX_KINDS ? kind : "other";
                budget.kinds.merge(kind, 1L, Long::sum);
                if (subject != null) {
                    budget.firstSubject.putIfAbsent(kind, clip(subject));
                }
                sweep(now);
                return;
            }
            if (refusal) {
                budget.tokens -= 1;
            }
        }
        for (long k : new long[]{key & ~1L, key | 1L}) { // this uid's counts go before its next itemized line
            Budget b = budgets.get(k);
            if (b != null && b.counted > 0) {
                writeCount(b);
            }
        }
        write(caller, now, action, subject, request, result, detail);
        sweep(now);
    }

    /** Writes the counts older than {@link #summaryAfter}, and forgets the budgets that are full and empty. */
    private void sweep(Instant now) {
        if (Duration.between(lastSweep, now).compareTo(Duration.ofSeconds(10)) < 0) {
            return;
        }
        lastSweep = now;
        for (Iterator<Budget> it = budgets.values().iterator(); it.hasNext();) {
            Budget b = it.next();
            b.refill(now);
            if (b.counted > 0 && Duration.between(b.since, now).compareTo(summaryAfter) >= 0) {
                writeCount(b);
            }
            if (b.counted == 0 && b.tokens >= REFUSAL_BURST) {
                it.remove();
            }
        }
    }

    private void writeCount(Budget b) {
        StringBuilder kinds = new StringBuilder();
        b.kinds.forEach((k, n) -> kinds.append(kinds.length() == 0 ? "" : ", ").append(k).append(' ').append(n)
                .append(b.firstSubject.containsKey(k) ? " (first on " + b.firstSubject.get(k) + ")" : ""));
        write(b.caller, clock.instant(), "audit.suppressed", null, null, "COUNTED", b.counted + " refusals of uid "
                + b.caller.uid() + " not itemized (more than " + REFUSAL_BURST + " at once, then " + REFUSAL_RATE
                + " a second), from " + b.since + " to " + b.last + ": " + kinds);
        b.counted = 0;
        b.since = null;
        b.kinds.clear();
        b.firstSubject.clear();
    }

    private void write(Caller caller, Instant at, String action, String subject, String request, String result,
            String detail) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("at", at.toString());
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
        if (timer != null) {
            timer.shutdownNow();
        }
        for (Budget b : budgets.values()) {
            if (b.counted > 0) {
                writeCount(b);
            }
        }
        closed = true;
        closeQuietly();
    }
}
