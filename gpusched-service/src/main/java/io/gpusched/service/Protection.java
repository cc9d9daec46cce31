package io.gpusched.service;

import io.gpusched.core.GpuConfig;
import io.gpusched.isolation.IsolationException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Which protection keeps processes outside gpusched jobs (logins, cron, ssh) off a shared node's GPUs, as
 * {@code gpusched doctor} reports it (naming the cgroups of cron and at, which a fenced {@code user.slice} leaves
 * out): the login fence ({@code gpu.service.login_cgroups}, checked from a process in
 * each login cgroup: can it open a GPU node now?), or the driver's device file mode ({@code NVreg_DeviceFileMode=0660}
 * with {@code NVreg_DeviceFileGID} of a group only jobs get: {@code gpu.service.job_group}), or none.
 *
 * @param loginFence    what the login fence does now, one line per configured cgroup (empty: off)
 * @param loginFenced   whether every configured login cgroup opens no GPU node now
 * @param deviceFiles   the GPU device nodes' modes and groups, and the driver's parameters
 * @param deviceGated   whether no GPU node is open to others (mode without o+rw) and a job group is configured
 * @param verdict       one sentence: which protection is active, or that none is
 */
public record Protection(List<String> loginFence, boolean loginFenced, List<String> deviceFiles, boolean deviceGated,
        String verdict) {

    /**
     * Looks at this host.
     *
     * @param config   the node's configuration ({@code gpu.service})
     * @param devRoot  where the device nodes are ({@code /dev})
     * @param procRoot procfs ({@code /proc}), for the driver's parameters
     * @return the report
     */
    public static Protection check(GpuConfig config, Path devRoot, Path procRoot) {
        List<String> nodes = gpuNodes(devRoot);
        List<String> fence = new ArrayList<>();
        boolean fenced = !config.service().loginCgroups().isEmpty();
        for (Path cg : config.service().loginCgroups()) {
            if (!Files.isDirectory(cg, LinkOption.NOFOLLOW_LINKS)) {
                fence.add(cg + ": no such cgroup");
                fenced = false;
                continue;
            }
            if (nodes.isEmpty()) {
                fence.add(cg + ": no GPU device node under " + devRoot + " to check");
                continue;
            }
            try {
                List<String> open = LoginFences.openNodes(cg, nodes);
                fence.add(cg + (open.isEmpty() ? ": fenced, no GPU node opens there" : ": NOT fenced, a process"
                        + " there opens " + open));
                fenced &= open.isEmpty();
            } catch (IsolationException e) {
                fence.add(cg + ": cannot check (" + e.getMessage() + "; the check needs root)");
                fenced = false;
            }
        }
        List<String> files = new ArrayList<>();
        boolean closed = !nodes.isEmpty();
        for (String n : nodes) {
            try {
                PosixFileAttributes a = Files.readAttributes(Path.of(n), PosixFileAttributes.class,
                        LinkOption.NOFOLLOW_LINKS);
                String mode = Integer.toOctalString(Files.getAttribute(Path.of(n), "unix:mode",
                        LinkOption.NOFOLLOW_LINKS) instanceof Integer m ? m & 0777 : 0);
                files.add(n + ": mode 0" + mode + ", group " + a.group().getName());
                closed &= a.permissions().stream().noneMatch(p -> p.name().startsWith("OTHERS_READ")
                        || p.name().startsWith("OTHERS_WRITE"));
            } catch (IOException | RuntimeException e) {
                files.add(n + ": cannot read its mode (" + e.getMessage() + ")");
                closed = false;
            }
        }
        Map<String, String> params = driverParams(procRoot);
        params.forEach((k, v) -> files.add("driver " + k + ": " + v));
        Optional<String> jobGroup = config.service().jobGroup();
        boolean gated = closed && jobGroup.isPresent();
        List<Path> daemons = unfencedDaemons(config.service().loginCgroups());
        for (Path d : daemons) {
            fence.add(d + ": cron or at jobs run here, outside the login fence");
        }
        String verdict;
        if (fenced) {
            verdict = "logins are fenced off the GPUs (gpu.service.login_cgroups " + config.service().loginCgroups()
                    + ") while the node service runs";
            if (!daemons.isEmpty() && !gated) {
                verdict += "; but cron and at jobs run outside the fence, in " + daemons + " (their PAM sessions do"
                        + " not reach user.slice): add those cgroups to gpu.service.login_cgroups, or gate the"
                        + " driver's device files (README, \"A shared node\")";
            }
        } else if (gated) {
            verdict = "GPU device nodes are closed to others (NVreg_DeviceFileMode=0660) and jobs get group "
                    + jobGroup.get() + " (gpu.service.job_group)";
        } else if (nodes.isEmpty()) {
            verdict = "no GPU device node under " + devRoot + ": nothing to protect here";
        } else {
            verdict = "NONE: any login can open every GPU node; set gpu.service.login_cgroups (README, \"A shared"
                    + " node\"), or NVreg_DeviceFileMode=0660 with gpu.service.job_group";
        }
        return new Protection(fence, fenced, files, gated, verdict);
    }

    /** Where cron and at run their jobs on systemd hosts (Debian: cron, atd; Fedora: crond). */
    static final List<String> JOB_DAEMONS = List.of("system.slice/cron.service", "system.slice/crond.service",
            "system.slice/atd.service");

    /**
     * @return the cgroups of cron and at daemons on this host (beside a configured {@code user.slice}) that no
     *         configured login cgroup contains: their jobs stay in them, outside the login fence
     */
    static List<Path> unfencedDaemons(List<Path> loginCgroups) {
        List<Path> out = new ArrayList<>();
        for (Path cg : loginCgroups) {
            Path name = cg.getFileName();
            if (name == null || !name.toString().equals("user.slice") || cg.getParent() == null) {
                continue;
            }
            for (String d : JOB_DAEMONS) {
                Path p = cg.getParent().resolve(d);
                if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) && !out.contains(p)
                        && loginCgroups.stream().noneMatch(l -> p.startsWith(l))) {
                    out.add(p);
                }
            }
        }
        return out;
    }

    private static List<String> gpuNodes(Path devRoot) {
        List<String> out = new ArrayList<>();
        try (var s = Files.list(devRoot)) {
            s.map(p -> p.getFileName().toString()).filter(n -> n.matches("nvidia([0-9]+|ctl)|kfd")).sorted()
                    .forEach(n -> out.add(devRoot.resolve(n).toString()));
        } catch (IOException e) {
            return out;
        }
        return out;
    }

    private static Map<String, String> driverParams(Path procRoot) {
        Map<String, String> out = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(procRoot.resolve("driver/nvidia/params"))) {
                String[] kv = line.split(":", 2);
                if (kv.length == 2 && kv[0].strip().startsWith("DeviceFile")) {
                    out.put("NVreg_" + kv[0].strip(), kv[1].strip());
                }
            }
        } catch (IOException e) {
            return out;
        }
        return out;
    }
}
