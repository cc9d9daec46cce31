package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.internal.Bpf;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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
    static volatile java.util.function.Predicate<String> fault = step -> false;

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
            id = d.id;
            active = true;
        }
    }

    @Override
    void replace(NodePlan next, List<DeviceRule> ignored) {
        try (CgroupDir d = CgroupDir.reopen(cgroup, true, id)) {
            install(d, rulesFor(next));
        }
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
