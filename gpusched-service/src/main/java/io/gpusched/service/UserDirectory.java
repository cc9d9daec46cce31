package io.gpusched.service;

import io.gpusched.core.GroupResolver;
import io.gpusched.core.UserQuotas;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The node's users as the service knows them, and the {@link GroupResolver} for per-group quotas: the groups the
 * kernel and NSS gave each caller when it connected, and for any other name (an owner an admin names) a look-up by
 * name through NSS ({@code id}, run with a clean environment, as every tool on the host sees them),
 * for the two cases the caller's own credentials do not cover: an admin naming another owner, and the groups of an
 * owner for per-group quotas. Answers are kept for {@value #TTL_SECONDS} s; a look-up that fails or times out answers
 * "unknown", which never grants anything. For the groups of a name NSS cannot find, those the kernel and NSS gave a
 * caller with that name when it connected stand (its groups' quotas keep holding for its requests that wait longer
 * than the cache, a caller named by its uid included: review35); a uid is never taken from them (review37). A name
 * is handed to {@code id} on its standard input, as bytes (UTF-8), never as an argument, which the JVM would encode
 * in the locale's charset ('?' for a non-ASCII name under a service started without a UTF-8 locale: review35).
 */
public final class UserDirectory implements GroupResolver {
    static final long TTL_SECONDS = 10;
    private static final int TIMEOUT_SECONDS = 5;

    private record Entry(OptionalLong uid, List<String> groups, long expires) {
    }

    private final Map<String, Entry> cache = new ConcurrentHashMap<>();
    /** what callers' credentials said, by name: the fall-back when a look-up by name fails */
    private final Map<String, Entry> callers = new ConcurrentHashMap<>();

    /** An empty directory; it fills as callers connect and names are looked up. */
    public UserDirectory() {
    }

    /**
     * @return the user's uid, or empty when NSS does not know the name now (as of the last {@value #TTL_SECONDS} s)
     *         or it reads as a uid: never from what a caller left, which could name a user since deleted, or the
     *         number another user is named by (review37)
     */
    OptionalLong uidOf(String user) {
        return UserQuotas.looksLikeUid(user) ? OptionalLong.empty() : lookup(user).uid();
    }

    /**
     * @return the names of the user's groups, or empty when unknown; for a name NSS cannot find, those its
     *         credentials gave when a caller connected with it (a caller named by its uid included)
     */
    @Override
    public List<String> groupsOf(String user) {
        Entry e = lookup(user);
        if (e.uid().isEmpty()) {
            Entry caller = callers.get(user);
            if (caller != null) {
                return caller.groups();
            }
        }
        return e.groups();
    }

    /** Remembers the groups the kernel and NSS gave a caller (a fresher answer than a look-up by name). */
    void remember(String user, long uid, List<String> groups) {
        // a name that reads as a uid is only ever a caller's own uid (CallerResolver names a user whose name is a
        // number by its uid): any other pairing is not taken, so one user's groups never land under another's name
        // (review37)
        if (UserQuotas.validName(user) && (!UserQuotas.looksLikeUid(user) || user.equals(Long.toString(uid)))) {
            Entry e = new Entry(OptionalLong.of(uid), List.copyOf(groups), System.nanoTime()
                    + TimeUnit.SECONDS.toNanos(TTL_SECONDS));
            cache.put(user, e);
            if (callers.size() >= 65_536 && !callers.containsKey(user)) {
                callers.clear(); // bounded by the node's users; a flood of distinct uids starts it over
            }
            callers.put(user, e);
        }
        if (cache.size() > 4096) {
            cache.clear();
        }
    }

    private Entry lookup(String user) {
        Entry e = cache.get(user);
        if (e != null && e.expires() - System.nanoTime() > 0) {
            return e;
        }
        Entry fresh = new Entry(OptionalLong.empty(), List.of(), System.nanoTime()
                + TimeUnit.SECONDS.toNanos(TTL_SECONDS));
        // a name, never a number: `id` takes "1001" (or "+1001") for the uid, which would give one user two names,
        // the quota and rate limits (kept by name) missing the number (review31)
        if (UserQuotas.validName(user) && !user.startsWith("-") && !UserQuotas.looksLikeUid(user)) {
            Optional<String> uid = id("-u", user);
            if (uid.isPresent() && uid.get().matches("[0-9]{1,10}")) {
                List<String> groups = id("-Gn", user).map(g -> Arrays.asList(g.split(" "))).orElse(List.of());
                fresh = new Entry(OptionalLong.of(Long.parseLong(uid.get())), List.copyOf(groups), fresh.expires());
            }
        }
        if (cache.size() > 4096) {
            cache.clear();
        }
        cache.put(user, fresh);
        return fresh;
    }

    private static Optional<String> id(String flag, String user) {
        try {
            // the name goes in as UTF-8 bytes on standard input: an argument would be encoded in the JVM's locale
            // charset first (sun.jnu.encoding; ASCII where the service has no UTF-8 locale: 'josé' became 'jos?')
            ProcessBuilder pb = new ProcessBuilder("/bin/sh", "-c",
                    "IFS= read -r n && exec /usr/bin/id \"$0\" -- \"$n\"", flag).redirectErrorStream(true);
            pb.environment().clear();
            pb.environment().put("PATH", "/usr/bin:/bin");
            Process p = pb.start();
            try (var in = p.getOutputStream()) {
                in.write((user + "\n").getBytes(StandardCharsets.UTF_8));
            }
            // wait first: a hung NSS source keeps the pipe open and a read would wait with it, on the queue's pass
            // (review37); id's output stays far below a pipe's capacity, so the child never blocks on writing it
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
            byte[] out = p.getInputStream().readNBytes(64 * 1024);
            return p.exitValue() == 0 ? Optional.of(new String(out, StandardCharsets.UTF_8).strip())
                    : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }
}
