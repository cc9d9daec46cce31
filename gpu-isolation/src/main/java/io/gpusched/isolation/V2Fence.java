package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.internal.Bpf;
import io.gpusched.isolation.internal.Sys;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * cgroup v2: one device program of ours per cgroup, attached with {@code BPF_F_ALLOW_MULTI}; an update replaces it
 * atomically with {@code BPF_F_REPLACE} where the kernel takes it (probed once), else attaches the new one and then
 * detaches the old one. Never a second copy left behind.
 */
final class V2Fence extends AbstractFence {

    /** Test hook: lets a test hand the kernel a program its verifier rejects. */
    static volatile UnaryOperator<BpfDeviceProgram> programFilter = UnaryOperator.identity();

    private int progFd = -1;

    V2Fence(CgroupDeviceIsolator owner, Path cgroup, Allocation allocation, NodePlan plan) {
        super(owner, cgroup, allocation, plan);
    }

    @Override
    public String mechanism() {
        return "v2";
    }

    @Override
    List<DeviceRule> rulesFor(NodePlan p) {
        return p.rules(owner.strict, true, owner.baseAllow);
    }

    private int openCgroup(Bpf bpf) {
        try {
            return Sys.openDirectory(cgroup.toString());
        } catch (Sys.ErrnoException e) {
            throw new IsolationException("cgroup v2: opening " + cgroup + " failed: " + e.getMessage()
                    + (e.errno() == 2 ? " (no such cgroup)" : ""), e);
        }
    }

    private int load(Bpf bpf, List<DeviceRule> r) {
        BpfDeviceProgram program = programFilter.apply(BpfDeviceProgram.of(r, !owner.strict));
        if (kernelBefore511()) {
            bpf.raiseMemlock();
        }
        try {
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

    @Override
    void apply() {
        Bpf bpf = owner.bpf();
        List<DeviceRule> r = rulesFor(plan);
        int cg = openCgroup(bpf);
        try {
            int fd = load(bpf, r);
            try {
                bpf.attach(cg, fd, Bpf.F_ALLOW_MULTI, 0);
            } catch (Bpf.BpfException e) {
                bpf.close(fd);
                throw new IsolationException("cgroup v2: attaching the device program to " + cgroup + " failed: "
                        + e.getMessage(), e);
            }
            progFd = fd;
            rules = r;
            active = true;
        } finally {
            bpf.close(cg);
        }
    }

    @Override
    void replace(NodePlan next, List<DeviceRule> nextRules) {
        Bpf bpf = owner.bpf();
        int cg = openCgroup(bpf);
        try {
            int fd = load(bpf, nextRules);
            try {
                if (owner.replaceSupported()) {
                    try {
                        bpf.attach(cg, fd, Bpf.F_ALLOW_MULTI | Bpf.F_REPLACE, progFd);
                        owner.replaceSupported(true);
                        swap(bpf, fd, nextRules);
                        return;
                    } catch (Bpf.BpfException e) {
                        if (e.errno() != 22) {
                            throw e;
                        }
                        owner.replaceSupported(false);
                    }
                }
                bpf.attach(cg, fd, Bpf.F_ALLOW_MULTI, 0);
                try {
                    bpf.detach(cg, progFd);
                } catch (Bpf.BpfException e) {
                    bpf.detach(cg, fd);
                    throw e;
                }
                swap(bpf, fd, nextRules);
            } catch (Bpf.BpfException e) {
                bpf.close(fd);
                throw new IsolationException("cgroup v2: replacing the device program of " + cgroup + " failed: "
                        + e.getMessage() + "; the previous program stays attached", e);
            }
        } finally {
            bpf.close(cg);
        }
    }

    private void swap(Bpf bpf, int fd, List<DeviceRule> nextRules) {
        bpf.close(progFd);
        progFd = fd;
        rules = nextRules;
    }

    @Override
    void remove() {
        Bpf bpf = owner.bpf();
        if (!Files.isDirectory(cgroup)) {
            bpf.close(progFd);
            return;
        }
        int cg = openCgroup(bpf);
        try {
            bpf.detach(cg, progFd);
        } catch (Bpf.BpfException e) {
            throw new IsolationException("cgroup v2: detaching the device program from " + cgroup + " failed: "
                    + e.getMessage(), e);
        } finally {
            bpf.close(cg);
        }
        bpf.close(progFd);
        progFd = -1;
    }
}
