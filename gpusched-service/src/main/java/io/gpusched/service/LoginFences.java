package io.gpusched.service;

import io.gpusched.core.devices.DeviceNode;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import io.gpusched.isolation.IsolationException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Logins fenced off the GPUs ({@code gpu.service.login_cgroups}): while the service runs, every process in those
 * cgroups and below them (login sessions, cron, ssh: {@code user.slice} under systemd) may open no GPU device node and
 * no vendor control node ({@link CgroupDeviceIsolator#fenceOff}); jobs, in cgroups of their own outside them, open
 * exactly their own. The kernel runs the device programs of a cgroup and of all its ancestors and a deny anywhere wins,
 * so a job cgroup must not lie inside a login cgroup: that is refused at start.
 *
 * <p>Each fence is checked after it is put on: a probe process in a fresh child of the login cgroup tries every GPU
 * node for reading and writing ({@code access(2)}, which runs the device programs as {@code open} does); if any is
 * still allowed the kernel is not applying the fence (no BPF device hook, no devices controller) and the service
 * refuses to start, naming the cgroup and the node, rather than run with a fence that is open.
 *
 * <p>On a clean stop the fences are revoked (the cgroups are back to the host's policy). If the service is killed they
 * stay (a device program outlives the process that attached it; v1 rules are the cgroup's own): logins stay fenced
 * until the service starts again, which replaces its own programs (never stacks them) and revokes the fence of a
 * cgroup no longer configured (the fenced cgroups are listed in {@code <state dir>/login-fences}).
 */
final class LoginFences implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LoginFences.class);

    private final CgroupDeviceIsolator isolator;
    private final List<Path> cgroups;
    private final Path record;
    private final List<Fence> fences = new ArrayList<>();

    /**
     * @param cgroups the login cgroups ({@code gpu.service.login_cgroups}); empty: off
     * @param record  the file listing what is fenced, so a restart after a kill can undo what is no longer configured
     */
    LoginFences(CgroupDeviceIsolator isolator, List<Path> cgroups, Path record) {
        this.isolator = isolator;
        this.cgroups = List.copyOf(cgroups);
        this.record = record;
    }

    /** @return the fenced cgroups (empty when off) */
    List<Path> cgroups() {
        return cgroups;
    }

    /**
     * Refuses a job cgroup parent inside (or above) a login cgroup: its jobs would be fenced off their own GPUs, or
     * the logins would not be.
     *
     * @throws IsolationException naming both
     */
    void checkJobParent(Path jobParent) {
        for (Path login : cgroups) {
            if (jobParent.startsWith(login) || login.startsWith(jobParent)) {
                throw new IsolationException("the job cgroup parent " + jobParent + " and the login cgroup " + login
                        + " are nested: the kernel applies the device programs of every ancestor, so jobs there"
                        + " could not open their own GPUs (or the logins would not be fenced); set"
                        + " gpu.service.job_cgroup_parent outside every login cgroup");
            }
        }
    }

    /**
     * Fences every login cgroup and checks each fence holds; revokes the fences of cgroups a previous run fenced that
     * are no longer configured.
     *
     * @throws IsolationException when a cgroup cannot be fenced or the kernel does not apply the fence (what was put
     *                            on is revoked again)
     */
    void start() {
        Set<Path> before = previous();
        for (Path old : before) {
            if (!cgroups.contains(old) && Files.isDirectory(old)) {
                try {
                    isolator.fenceOff(old).revoke();
                    LOG.info("login fence on {} revoked: it is no longer in gpu.service.login_cgroups", old);
                } catch (RuntimeException e) {
                    LOG.warn("could not revoke the login fence a previous run put on {}: {}", old, e.getMessage());
                }
            }
        }
        try {
            for (Path cg : cgroups) {
                if (!Files.isDirectory(cg, LinkOption.NOFOLLOW_LINKS)) {
                    throw new IsolationException("login cgroup " + cg + " (gpu.service.login_cgroups) does not exist or"
                            + " is not a directory");
                }
                Fence f = isolator.fenceOff(cg);
                fences.add(f);
                verify(cg);
                LOG.info("logins in {} fenced off every GPU ({})", cg, f.mechanism());
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        write(cgroups);
    }

    /**
     * Checks from a process in a fresh child of {@code cg} that no GPU node of the host can be opened.
     *
     * @throws IsolationException naming the node the kernel still allows
     */
    void verify(Path cg) {
        List<String> nodes = new ArrayList<>();
        for (DeviceNode n : isolator.denyAllNodes()) {
            if (Files.exists(n.path())) {
                nodes.add(n.path().toString());
            }
        }
        if (nodes.isEmpty()) {
            LOG.warn("login fence on {}: no GPU device node exists on this host, so the fence could not be checked by"
                    + " opening one", cg);
            return;
        }
        List<String> open = openNodes(cg, nodes);
        if (!open.isEmpty()) {
            throw new IsolationException("the kernel does not apply the login fence on " + cg + ": a process there"
                    + " can still open " + open.get(0) + " (no BPF device hook for cgroup2, or no"
                    + " devices controller for v1, on this kernel); logins are NOT fenced, so the service does not"
                    + " start with gpu.service.login_cgroups set: fix the kernel, or protect the nodes with the"
                    + " driver's NVreg_DeviceFileMode=0660 (see README, \"A shared node\")");
        }
    }

    /**
     * Asks, from a root shell in a fresh child of {@code cg} (so every device program of {@code cg} and its ancestors
     * applies), which of {@code nodes} can be read or written ({@code access(2)} runs the device programs as
     * {@code open} does, without opening the device).
     *
     * @return the nodes a process there can open
     * @throws IsolationException when the check cannot run
     */
    static List<String> openNodes(Path cg, List<String> nodes) {
        Path probe = cg.resolve("gpusched-probe-" + UUID.randomUUID().toString().substring(0, 8));
        String out;
        int rc;
        try {
            Files.createDirectory(probe);
            try {
                List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                        + "for f; do if /usr/bin/test -r \"$f\" || /usr/bin/test -w \"$f\"; then echo \"OPEN $f\"; fi;"
                        + " done; exit 0", probe.toString()));
                cmd.addAll(nodes);
                ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
                pb.environment().clear();
                pb.environment().put("PATH", "/usr/bin:/bin");
                Process p = pb.start();
                out = new String(p.getInputStream().readNBytes(64 * 1024), StandardCharsets.UTF_8);
                if (!p.waitFor(30, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    throw new IsolationException("checking the devices of " + cg + " took over 30 s");
                }
                rc = p.exitValue();
            } finally {
                for (int i = 0; i < 100; i++) {
                    try {
                        Files.deleteIfExists(probe);
                        break;
                    } catch (IOException busy) {
                        Thread.sleep(10);
                    }
                }
            }
        } catch (IOException e) {
            throw new IsolationException("cannot check the devices of " + cg + ": " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IsolationException("interrupted while checking the devices of " + cg);
        }
        if (rc != 0) {
            throw new IsolationException("cannot check the devices of " + cg + ": the probe failed (exit " + rc
                    + "): " + out.strip());
        }
        return out.lines().filter(l -> l.startsWith("OPEN ")).map(l -> l.substring(5)).toList();
    }

    private Set<Path> previous() {
        Set<Path> out = new LinkedHashSet<>();
        try {
            if (Files.isRegularFile(record, LinkOption.NOFOLLOW_LINKS)) {
                for (String l : Files.readAllLines(record, StandardCharsets.UTF_8)) {
                    if (l.startsWith("/") && !l.contains("\0")) {
                        out.add(Path.of(l));
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("cannot read {}: {}", record, e.toString());
        }
        return out;
    }

    private void write(List<Path> fenced) {
        try {
            Path tmp = record.resolveSibling(record.getFileName() + ".tmp");
            StringBuilder sb = new StringBuilder();
            fenced.forEach(p -> sb.append(p).append('\n'));
            Files.writeString(tmp, sb.toString(), StandardCharsets.UTF_8);
            Files.move(tmp, record, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            LOG.warn("cannot write {}: {}", record, e.toString());
        }
    }

    /** Revokes the fences (a clean stop): the login cgroups are back to the host's policy. */
    @Override
    public void close() {
        for (Fence f : fences) {
            try {
                f.revoke();
            } catch (RuntimeException e) {
                LOG.warn("revoking the login fence on {} failed (it stays in force): {}", f.cgroup(), e.getMessage());
            }
        }
        if (!fences.isEmpty()) {
            write(List.of());
        }
        fences.clear();
    }
}
