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
 * "unknown", which never grants anything, except for a name a caller had when it connected: then what the kernel and
 * NSS gave that caller stands (its groups' quotas keep holding for its requests that wait longer than the cache, a
 * name NSS cannot find by name included: review35). A name is handed to {@code id} on its standard input, as bytes
 * (UTF-8), never as an argument, which the JVM would encode in the locale's charset ('?' for a non-ASCII name under
 * a service started without a UTF-8 locale: review35).
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

    /** @return the user's uid, or empty when NSS does not know the name */
    OptionalLong uidOf(String user) {
        return lookup(user).uid();
    }

    /** @return the names of the user's groups, or empty when unknown */
    @Override
    public List<String> groupsOf(String user) {
        return lookup(user).groups();
    }

    /** Remembers the groups the kernel and NSS gave a caller (a fresher answer than a look-up by name). */
    void remember(String user, long uid, List<String> groups) {
        if (UserQuotas.validName(user)) {
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
        if (UserQuotas.validName(user) && !user.startsWith("-") && !user.matches("\\+?[0-9]+")) {
            Optional<String> uid = id("-u", user);
            if (uid.isPresent() && uid.get().matches("[0-9]{1,10}")) {
                List<String> groups = id("-Gn", user).map(g -> Arrays.asList(g.split(" "))).orElse(List.of());
                fresh = new Entry(OptionalLong.of(Long.parseLong(uid.get())), List.copyOf(groups), fresh.expires());
            }
        }
        Entry caller = callers.get(user);
        if (fresh.uid().isEmpty() && caller != null) {
            fresh = new Entry(caller.uid(), caller.groups(), fresh.expires());
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
            byte[] out = p.getInputStream().readNBytes(64 * 1024);
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
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
