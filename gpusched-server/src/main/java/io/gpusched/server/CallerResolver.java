package io.gpusched.server;

import io.gpusched.core.UserQuotas;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns a peer's uid and gid (the kernel's) into a {@link Caller}: the user name and the names of the user's groups
 * come from NSS through {@code id}, run as a child with a clean environment (so files, LDAP and sssd users alike
 * resolve as every other tool on the host sees them), never from a request. Results are kept per uid for a short
 * while ({@link #TTL_NANOS}), and concurrent look-ups of one uid share one child.
 *
 * <p>A uid NSS does not know is a caller named by its number, with no group and no admin rights (unless it is 0). A
 * look-up that fails (no {@code id}, a hung NSS source past {@value #TIMEOUT_SECONDS} s) gives the same: identity
 * never depends on a name, and a failure never grants a right. A user whose name is outside {@link #name}'s rule, or
 * reads as a uid ({@link UserQuotas#looksLikeUid}), is named by its own uid too, with the groups NSS gives that uid
 * (their quotas hold; an admin group makes it an admin).
 */
final class CallerResolver {
    private static final Logger LOG = LoggerFactory.getLogger(CallerResolver.class);
    /** How long a uid's names are kept. */
    static final long TTL_NANOS = TimeUnit.SECONDS.toNanos(10);
    static final int TIMEOUT_SECONDS = 5;
    private static final int MAX_OUTPUT = 64 * 1024;
    private static final int MAX_ENTRIES = 4096;

    private final String adminGroup;
    private final Path idCommand;
    private final LongSupplier nanos;
    private final Map<Long, Entry> cache = new ConcurrentHashMap<>();

    /** One uid's names, or the look-up that finds them. */
    private record Entry(FutureTask<Names> task, long expires) {
    }

    /** What NSS says about a uid. */
    record Names(String user, List<String> groups, boolean known) {
    }

    /**
     * @param adminGroup members of this group are admins (root always is); null: root only
     */
    CallerResolver(String adminGroup) {
        this(adminGroup, findId(), System::nanoTime);
    }

    CallerResolver(String adminGroup, Path idCommand, LongSupplier nanos) {
        this.adminGroup = adminGroup;
        this.idCommand = idCommand;
        this.nanos = nanos;
    }

    private static Path findId() {
        for (String p : List.of("/usr/bin/id", "/bin/id")) {
            if (Files.isExecutable(Path.of(p))) {
                return Path.of(p);
            }
        }
        return Path.of("/usr/bin/id");
    }

    /**
     * @param uid the peer's uid (the kernel's)
     * @param gid the peer's gid (the kernel's)
     * @return the caller; blocks for one {@code id} look-up when the uid is not cached
     */
    Caller resolve(long uid, long gid) {
        Names n = names(uid);
        boolean admin = uid == 0 || adminGroup != null && n.groups().contains(adminGroup);
        return new Caller(uid, gid, n.user(), n.groups(), admin);
    }

    Names names(long uid) {
        long now = nanos.getAsLong();
        Entry e = cache.get(uid);
        if (e == null || now - e.expires() > 0) {
            Entry fresh = new Entry(new FutureTask<>(() -> lookUp(uid)), now + TTL_NANOS);
            e = cache.compute(uid, (k, old) -> old != null && now - old.expires() <= 0 ? old : fresh);
            if (e == fresh) {
                if (cache.size() > MAX_ENTRIES) {
                    cache.values().removeIf(x -> now - x.expires() > 0);
                }
                fresh.task().run();
            }
        }
        try {
            return e.task().get();
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            return unknown(uid);
        } catch (ExecutionException ee) {
            return unknown(uid);
        }
    }

    private static Names unknown(long uid) {
        return new Names(Long.toString(uid), List.of(), false);
    }

    private Names lookUp(long uid) {
        String user = run("-nu", uid);
        if (user == null) {
            return unknown(uid);
        }
        // a name outside the rule (a space, as Active Directory names through sssd may have) is not used, but the
        // uid's groups still are: a group's quota holds for its members whatever their names (review35)
        // nor a name that reads as a uid (a user named "1002" whose uid is not 1002, as useradd --badname allows):
        // it would be the name of the caller whose uid is that number, sharing its rate, cache and quota (review37)
        boolean named = name(user.strip()) && !UserQuotas.looksLikeUid(user.strip());
        String groups = run("-znG", uid);
        List<String> g = new ArrayList<>();
        if (groups != null) {
            for (String s : groups.split("\0")) {
                if (name(s) && g.size() < 1024 && !g.contains(s)) {
                    g.add(s);
                }
            }
        }
        return named ? new Names(user.strip(), List.copyOf(g), true)
                : new Names(Long.toString(uid), List.copyOf(g), false);
    }

    /**
     * @return whether {@code s} can be a user or group name: {@link UserQuotas#validName}, the rule the quotas and the
     *         node service's user directory use too (one rule, so no caller is named outside what they look up)
     */
    static boolean name(String s) {
        return UserQuotas.validName(s);
    }

    /** @return {@code id}'s output for {@code +uid} (the uid as a number, never a name), or null when it failed */
    private String run(String option, long uid) {
        ProcessBuilder pb = new ProcessBuilder(idCommand.toString(), option, "--", "+" + uid);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("LC_ALL", "C");
        pb.redirectErrorStream(false).redirectError(ProcessBuilder.Redirect.DISCARD);
        Process p = null;
        try {
            p = pb.start();
            p.getOutputStream().close();
            // wait first: a hung NSS source keeps the pipe open, and a read would wait with it (id's output is far
            // below a pipe's capacity, so the child never blocks on writing it)
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                LOG.warn("id {} +{} took over {} s (NSS source hung?); the caller is known by uid only", option, uid,
                        TIMEOUT_SECONDS);
                return null;
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            try (InputStream in = p.getInputStream()) {
                byte[] buf = new byte[4096];
                int r;
                while ((r = in.read(buf)) > 0 && out.size() < MAX_OUTPUT) {
                    out.write(buf, 0, r);
                }
            }
            return p.exitValue() == 0 ? out.toString(StandardCharsets.UTF_8) : null;
        } catch (IOException e) {
            LOG.warn("cannot run {} to look up uid {}: {}", idCommand, uid, e.toString());
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } finally {
            if (p != null && p.isAlive()) {
                p.destroyForcibly();
            }
        }
    }
}
