package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.isolation.internal.Bpf;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.Predicate;
import java.util.function.UnaryOperator;

/**
 * cgroup v2: one device program of ours per cgroup, attached with {@code BPF_F_ALLOW_MULTI}. Ours are recognized in
 * the kernel by their name ({@link CgroupDeviceIsolator#PROGRAM_NAME}, read with {@code BPF_PROG_QUERY} and
 * {@code BPF_OBJ_GET_INFO_BY_FD}), whichever process attached them, so a fence left by a process that died is
 * replaced, not stacked with. Fencing or updating loads the new program, swaps it in for one of ours atomically with
 * {@code BPF_F_REPLACE} (or attaches it next to them: programs are ANDed, so this only narrows), then detaches every
 * other program of ours. Revoke detaches all of ours. The cgroup is opened once per operation and checked to be the
 * very cgroup (inode = cgroup id) that was fenced.
 */
final class V2Fence extends AbstractFence {

    /** Test hook: lets a test hand the kernel a program its verifier rejects. */
    static volatile UnaryOperator<BpfDeviceProgram> programFilter = UnaryOperator.identity();

    /** Test hook: fails a bpf(2) step ("load", "attach", "detach") when it answers true, as the kernel would. */
    static volatile Predicate<String> fault = step -> false;

    private static void step(String name) {
        if (fault.test(name)) {
            throw Bpf.injected("BPF " + name, 5);
        }
    }

    static final int ENOENT = 2;
    static final int EINVAL = 22;

    private int progFd = -1;
    private CgroupDir.Id id;

    V2Fence(CgroupDeviceIsolator owner, Path cgroup, Allocation allocation, NodePlan plan) {
        super(owner, cgroup, allocation, plan);
    }

    @Override
    public String mechanism() {
        return "v2";
    }

    @Override
    CgroupDir.Id id() {
        return id;
    }

    @Override
    List<DeviceRule> rulesFor(NodePlan p) {
        return p.rules(owner.strict, true, owner.baseAllow);
    }

    private int load(Bpf bpf, List<DeviceRule> r) {
        BpfDeviceProgram program = programFilter.apply(BpfDeviceProgram.of(r, !owner.strict));
        if (kernelBefore511()) {
            bpf.raiseMemlock();
        }
        try {
            step("load");
            return bpf.loadDeviceProgram(program.bytes(), CgroupDeviceIsolator.PROGRAM_NAME);
        } catch (Bpf.BpfException e) {
            throw new IsolationException("cgroup v2: the kernel rejected the device program for " + cgroup + ": "
                    + e.getMessage(), e);
        }
    }

    static boolean kernelBefore511() {
        String[] v = System.getProperty("os.version", "6.0").split("[.-]");
        try {
            int major = Integer.parseInt(v[0]);
            int minor = v.length > 1 ? Integer.parseInt(v[1]) : 0;
            return major < 5 || (major == 5 && minor < 11);
        } catch (NumberFormatException e) {
            return false;
        }
    }

    /** @return ids of the device programs of ours attached directly to the cgroup */
    static List<Integer> ours(Bpf bpf, int cgroupFd) {
        List<Integer> out = new ArrayList<>();
        for (int pid : bpf.query(cgroupFd)) {
            int pfd;
            try {
                pfd = bpf.progFd(pid);
            } catch (Bpf.BpfException e) {
                if (e.errno() == ENOENT) {
                    continue;
                }
                throw e;
            }
            try {
                if (CgroupDeviceIsolator.PROGRAM_NAME.equals(bpf.info(pfd)[1])) {
                    out.add(pid);
                }
            } finally {
                bpf.close(pfd);
            }
        }
        return out;
    }

    /** Detaches every program of ours but {@code keepId}. */
    private static void detachOurs(Bpf bpf, int cgroupFd, int keepId) {
        for (int pid : ours(bpf, cgroupFd)) {
            if (pid == keepId) {
                continue;
            }
            int pfd;
            try {
                pfd = bpf.progFd(pid);
            } catch (Bpf.BpfException e) {
                if (e.errno() == ENOENT) {
                    continue;
                }
                throw e;
            }
            try {
                step("detach");
                bpf.detach(cgroupFd, pfd);
            } catch (Bpf.BpfException e) {
                if (e.errno() != ENOENT) {
                    throw e;
                }
            } finally {
                bpf.close(pfd);
            }
        }
    }

    /** Puts a program for {@code r} in force as the only one of ours; on failure what was in force stays. */
    private void install(CgroupDir d, List<DeviceRule> r) {
        Bpf bpf = owner.bpf();
        int fd = load(bpf, r);
        int newId;
        try {
            newId = (Integer) bpf.info(fd)[0];
            List<Integer> before = ours(bpf, d.fd);
            boolean attached = false;
            if (!before.isEmpty() && owner.replaceSupported()) {
                int oldFd = -1;
                try {
                    oldFd = bpf.progFd(before.get(0));
                    step("attach");
                    bpf.attach(d.fd, fd, Bpf.F_ALLOW_MULTI | Bpf.F_REPLACE, oldFd);
                    owner.replaceSupported(true);
                    attached = true;
                } catch (Bpf.BpfException e) {
                    if (e.errno() == EINVAL) {
                        owner.replaceSupported(false);
                    } else if (e.errno() != ENOENT) {
                        throw e;
                    }
                } finally {
                    bpf.close(oldFd);
                }
            }
            if (!attached) {
                step("attach");
                bpf.attach(d.fd, fd, Bpf.F_ALLOW_MULTI, 0);
            }
        } catch (Bpf.BpfException e) {
            bpf.close(fd);
            throw new IsolationException("cgroup v2: attaching the device program to " + cgroup + " failed: "
                    + e.getMessage() + "; what was in force stays", e);
        }
        try {
            detachOurs(bpf, d.fd, newId);
        } catch (Bpf.BpfException e) {
            String back;
            try {
                bpf.detach(d.fd, fd);
                back = "; the new program was detached again, the previous ones stay";
            } catch (Bpf.BpfException again) {
                back = "; the new program stays attached next to older ones of ours (" + again.getMessage() + ")";
            }
            bpf.close(fd);
            throw new IsolationException("cgroup v2: detaching older device programs of ours from " + cgroup
                    + " failed: " + e.getMessage() + back, e);
        }
        bpf.close(progFd);
        progFd = fd;
        rules = r;
    }

    @Override
    void apply() {
        try (CgroupDir d = CgroupDir.open(cgroup, true)) {
            install(d, rulesFor(plan));
            String refused = hostRefuses(d, plan);
            if (refused != null) {
                String back;
                try {
                    detachOurs(owner.bpf(), d.fd, -1);
                    back = "; the program was detached again, the cgroup is as it was";
                } catch (Bpf.BpfException e) {
                    back = "; detaching the program again failed too (" + e.getMessage() + "): it stays attached";
                }
                dropped();
                throw new IsolationException(refused + back);
            }
            id = d.id;
            active = true;
        }
    }

    @Override
    void replace(NodePlan next, List<DeviceRule> ignored) {
        try (CgroupDir d = CgroupDir.reopen(cgroup, true, id)) {
            List<DeviceRule> previous = rules;
            install(d, rulesFor(next));
            String refused = hostRefuses(d, next);
            if (refused != null) {
                String back;
                try {
                    install(d, previous);
                    back = "; the previous program is back in force";
                } catch (IsolationException e) {
                    back = "; putting the previous program back failed too (" + e.getMessage() + "): the rules of "
                            + cgroup + " are now unknown";
                }
                throw new IsolationException(refused + back);
            }
        }
    }

    /**
     * Checks, with our new program in force, that the host's policy lets a process of the cgroup read and write every
     * node the plan allows: a shell placed in a short-lived child cgroup (it inherits every program of the cgroup and
     * its ancestors) asks {@code access(R_OK)} and {@code access(W_OK)} for each node through coreutils {@code test};
     * the kernel runs the device programs for {@code access} as for {@code open}, without opening the device. Nodes
     * that do not exist are not checked. Where the check cannot run, a WARN says so and the fence goes on.
     *
     * @return why the host refuses, naming the node, its GPU, the cgroup and the programs; null when it allows all
     */
    private String hostRefuses(CgroupDir d, NodePlan p) {
        // named through our fd of the fenced cgroup, so the probe is made in this very cgroup whatever its path holds
        String name = "gpusched-probe-" + UUID.randomUUID().toString().substring(0, 8);
        Path child = d.file(name);
        String childForShell = "/proc/" + ProcessHandle.current().pid() + "/fd/" + d.fd + "/" + name;
        List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                + "for f; do r=-; w=-; [ -e \"$f\" ] || continue; /usr/bin/test -r \"$f\" && r=r;"
                + " /usr/bin/test -w \"$f\" && w=w; echo \"$r$w $f\"; done", childForShell));
        p.allowed().forEach(n -> cmd.add(n.path().toString()));
        String out;
        int rc;
        try {
            Files.createDirectory(child);
            try {
                Process pr = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                out = new String(pr.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                rc = pr.waitFor();
            } finally {
                removeProbe(child);
            }
        } catch (IOException e) {
            LOG.warn("cgroup v2: could not check the host's policy of {} for the allowed nodes: {}", cgroup,
                    e.getMessage());
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            LOG.warn("cgroup v2: interrupted while checking the host's policy of {}", cgroup);
            return null;
        }
        if (rc != 0) {
            LOG.warn("cgroup v2: could not check the host's policy of {} (probe exit {}): {}", cgroup, rc, out.strip());
            return null;
        }
        for (String line : out.strip().split("\n")) {
            if (line.length() < 3 || line.startsWith("rw ")) {
                continue;
            }
            String path = line.substring(3);
            for (DeviceNode n : p.allowed()) {
                if (n.path().toString().equals(path)) {
                    int foreign = Math.max(0, owner.bpf().query(d.fd).length - ours(owner.bpf(), d.fd).size());
                    return "cgroup v2: the host's policy denies " + owner.describe(n) + " to " + cgroup + ": with"
                            + " our program allowing it, a process of the cgroup may not "
                            + (line.startsWith("r") ? "write" : line.charAt(1) == 'w' ? "read" : "read or write")
                            + " it, so a device program of the host denies it (" + foreign
                            + " other program(s) attached"
                            + " to the cgroup itself; its ancestors' programs apply too, and what they test cannot be"
                            + " read back)";
                }
            }
        }
        return null;
    }

    private static void removeProbe(Path child) {
        for (int i = 0; i < 100; i++) {
            try {
                Files.deleteIfExists(child);
                return;
            } catch (IOException busy) {
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        LOG.warn("cgroup v2: could not remove probe cgroup {}", child);
    }

    @Override
    void remove() {
        try (CgroupDir d = CgroupDir.reopen(cgroup, true, id)) {
            try {
                detachOurs(owner.bpf(), d.fd, -1);
            } catch (Bpf.BpfException e) {
                throw new IsolationException("cgroup v2: detaching the device programs of ours from " + cgroup
                        + " failed: " + e.getMessage() + "; the fence stays in force", e);
            }
        }
    }

    @Override
    void dropped() {
        if (progFd >= 0) {
            owner.bpf().close(progFd);
            progFd = -1;
        }
    }
}
