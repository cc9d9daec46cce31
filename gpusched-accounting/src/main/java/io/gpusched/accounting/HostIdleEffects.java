package io.gpusched.accounting;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.JobCgroupException;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.host.StateDirectory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The idle policy's effects on a real node: releases through the scheduler, signals with {@code kill} (no shell) to the
 * processes of the allocation's job cgroup, else to its holder process (checked by its start time, so a reused pid is
 * never signalled), and runs the hook without a shell, with a clean environment, for at most
 * {@value #HOOK_TIMEOUT_SECONDS} s. A sampler running as root never runs the hook as root on a user's behalf: it runs
 * it as the allocation's owner ({@code setpriv --reuid --regid --clear-groups}), and not at all when the owner's uid is
 * unknown.
 */
public final class HostIdleEffects implements IdleEffects {
    private static final Logger LOG = LoggerFactory.getLogger(HostIdleEffects.class);
    /** Longest a hook may run before it is killed. */
    public static final long HOOK_TIMEOUT_SECONDS = 10;

    private final GpuScheduler scheduler;
    private final boolean root;
    private final List<Consumer<IdleNotice>> listeners = new CopyOnWriteArrayList<>();

    /**
     * @param scheduler the node's scheduler (releases); whether this process runs as root (then the hook runs as the
     *                  owner) is read from the kernel, not taken from the caller
     */
    public HostIdleEffects(GpuScheduler scheduler) {
        this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
        this.root = StateDirectory.isRoot();
    }

    /** @param l gets every step told to holders @return this */
    public HostIdleEffects listener(Consumer<IdleNotice> l) {
        listeners.add(Objects.requireNonNull(l, "listener"));
        return this;
    }

    @Override
    public void notify(Allocation a, IdleStep step, Duration idleFor, String message) {
        IdleNotice n = new IdleNotice(a.id(), a.owner(), a.deviceIndices(), step, idleFor, message);
        LOG.info("idle {} {}: {}", step, a.id(), message);
        for (Consumer<IdleNotice> l : listeners) {
            try {
                l.accept(n);
            } catch (RuntimeException e) {
                LOG.warn("idle listener {} failed: {}", l, e.toString());
            }
        }
    }

    @Override
    public String release(Allocation a) {
        boolean released = scheduler.release(a.id());
        if (!released) {
            throw new IllegalStateException(a.id() + " was no longer live");
        }
        return "released " + a.id();
    }

    @Override
    public String signal(Allocation a, String signal) {
        if (!IdlePolicy.SIGNALS.contains(signal)) {
            throw new IllegalArgumentException("signal " + signal + " is not one of " + IdlePolicy.SIGNALS);
        }
        List<Long> pids = new ArrayList<>();
        String target;
        Optional<String> cgroup = a.request().jobCgroup();
        if (cgroup.isPresent()) {
            Path procs = Path.of(cgroup.get()).resolve("cgroup.procs");
            try {
                if (Files.isSymbolicLink(Path.of(cgroup.get()))) {
                    throw new IllegalStateException("job cgroup " + cgroup.get() + " is a symbolic link");
                }
                // only the job-<id> cgroup a launcher made for this allocation: a record naming another cgroup (a
                // service's, a login's) is not signalled
                if (!JobCgroups.check(Path.of(cgroup.get()), a.id())) {
                    throw new IllegalStateException("job cgroup " + cgroup.get() + " is gone");
                }
                for (String line : Files.readAllLines(procs, StandardCharsets.US_ASCII)) {
                    if (line.matches("[0-9]{1,10}")) {
                        pids.add(Long.parseLong(line));
                    }
                }
            } catch (IOException e) {
                throw new IllegalStateException("cannot read " + procs + ": " + e.getMessage(), e);
            } catch (JobCgroupException e) {
                throw new IllegalStateException("not signalled: " + e.getMessage(), e);
            }
            target = "the " + pids.size() + " process(es) of job cgroup " + cgroup.get();
        } else if (a.request().holder().isPresent()) {
            HolderProcess h = a.request().holder().get();
            if (!h.isAlive()) {
                throw new IllegalStateException("holder " + h + " is gone");
            }
            if (!scheduler.stateDir().map(StateDirectory::writtenByThisUserAlone).orElse(true)) {
                throw new IllegalStateException("holder " + h + " is not signalled: the node ledger is shared (a state"
                        + " group), so a record there does not name a process this one may signal");
            }
            pids.add(h.pid());
            target = "holder " + h;
        } else {
            throw new IllegalStateException(a.id() + " has no job cgroup and no holder process to signal");
        }
        if (pids.isEmpty()) {
            throw new IllegalStateException(target + ": nothing to signal");
        }
        List<String> cmd = new ArrayList<>(List.of("/bin/kill", "-s", signal, "--"));
        pids.forEach(p -> cmd.add(Long.toString(p)));
        int rc = run(cmd, Map.of());
        if (rc != 0) {
            throw new IllegalStateException("kill -s " + signal + " exited " + rc + " for " + target);
        }
        return "sent SIG" + signal + " to " + target;
    }

    @Override
    public String runHook(Allocation a, List<String> argv) {
        List<String> cmd = new ArrayList<>();
        if (root) {
            OptionalLong uid = a.request().ownerUid();
            if (uid.isEmpty() || uid.getAsLong() == 0) {
                return "not run: the owner's uid is " + (uid.isEmpty() ? "unknown" : "0")
                        + ", and the hook never runs as root on a user's behalf";
            }
            OptionalLong gid = primaryGid(uid.getAsLong());
            if (gid.isEmpty()) {
                return "not run: uid " + uid.getAsLong() + " has no passwd entry (no group to run the hook with)";
            }
            cmd.addAll(List.of("/usr/bin/setpriv", "--reuid=" + uid.getAsLong(), "--regid=" + gid.getAsLong(),
                    "--clear-groups", "--"));
        }
        cmd.addAll(argv);
        Path exe = Path.of(argv.get(0));
        if (!Files.isRegularFile(exe) || !Files.isExecutable(exe)) {
            return "not run: " + exe + " is not an executable file";
        }
        int rc = run(cmd, Map.of("GPUSCHED_IDLE_ALLOCATION", a.id(), "GPUSCHED_IDLE_OWNER", a.owner().orElse("")));
        return rc == 0 ? argv.get(0) + " exited 0" : argv.get(0) + " exited " + rc;
    }

    /** @return the primary gid of a uid, from {@code getent passwd} (NSS), run without a shell */
    static OptionalLong primaryGid(long uid) {
        try {
            Process p = new ProcessBuilder("getent", "passwd", Long.toString(uid)).redirectErrorStream(true)
                    .start();
            byte[] out = p.getInputStream().readNBytes(4096);
            if (!p.waitFor(5, TimeUnit.SECONDS) || p.exitValue() != 0) {
                p.destroyForcibly();
                return OptionalLong.empty();
            }
            String[] f = new String(out, StandardCharsets.UTF_8).strip().split(":");
            return f.length > 3 && f[3].matches("[0-9]{1,10}") ? OptionalLong.of(Long.parseLong(f[3]))
                    : OptionalLong.empty();
        } catch (IOException e) {
            return OptionalLong.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return OptionalLong.empty();
        }
    }

    private static int run(List<String> cmd, Map<String, String> env) {
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectInput(ProcessBuilder.Redirect.from(
                            Path.of("/dev/null").toFile()));
            pb.environment().clear();
            pb.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
            pb.environment().put("LANG", "C.UTF-8");
            pb.environment().putAll(env);
            pb.directory(Path.of("/").toFile());
            Process p = pb.start();
            if (!p.waitFor(HOOK_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return 124;
            }
            return p.exitValue();
        } catch (IOException e) {
            throw new IllegalStateException("cannot run " + cmd.get(0) + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return 130;
        }
    }
}
