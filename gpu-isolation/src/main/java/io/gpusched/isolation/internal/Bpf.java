package io.gpusched.isolation.internal;

import com.sun.jna.LastErrorException;
import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/** {@code bpf(2)} for cgroup device programs, with {@code union bpf_attr} laid out by hand (LP64). Internal. */
public final class Bpf {
    static final int PROG_LOAD = 5;
    static final int PROG_ATTACH = 8;
    static final int PROG_DETACH = 9;
    static final int PROG_GET_FD_BY_ID = 13;
    static final int OBJ_GET_INFO_BY_FD = 15;
    static final int PROG_QUERY = 16;
    static final int PROG_TYPE_CGROUP_DEVICE = 15;
    static final int CGROUP_DEVICE = 6;
    /** BPF_F_ALLOW_MULTI. */
    public static final int F_ALLOW_MULTI = 2;
    /** BPF_F_REPLACE. */
    public static final int F_REPLACE = 4;
    /** sizeof(union bpf_attr) on 6.x is 144; a larger zeroed buffer is accepted and leaves room for newer kernels. */
    static final int ATTR_SIZE = 256;
    static final int PROG_INFO_SIZE = 232;
    static final int PROG_INFO_ID = 4;
    static final int PROG_INFO_NAME = 64;

    /** A bpf(2) call failed. */
    public static final class BpfException extends RuntimeException {
        private final int errno;
        private final String verifierLog;

        BpfException(String what, LastErrorException e, String log) {
            super(what + " failed: " + Libc.describe(e) + (log.isBlank() ? "" : "; verifier log:\n" + log.strip()));
            this.errno = e.getErrorCode();
            this.verifierLog = log;
        }

        /** @return errno */
        public int errno() {
            return errno;
        }

        /** @return the verifier's log, empty unless a load was rejected */
        public String verifierLog() {
            return verifierLog;
        }
    }

    /** @return a failure as a bpf(2) call would report it, for fault-injection seams in tests */
    public static BpfException injected(String what, int errno) {
        return new BpfException(what + " (injected)", new LastErrorException(errno), "");
    }

    private final Libc libc;
    private final long sysBpf;

    /** @param libc libc through JNA */
    public Bpf(Libc libc) {
        this.libc = libc;
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        this.sysBpf = arch.contains("aarch64") || arch.contains("arm64") ? 280 : 321;
    }

    private long call(int cmd, Memory attr) {
        return libc.syscall(sysBpf, cmd, attr, ATTR_SIZE);
    }

    /**
     * Loads a device program (license GPL). On rejection it loads once more with the verifier log on and puts the
     * log in the exception.
     *
     * @return the program fd
     */
    public int loadDeviceProgram(byte[] insns, String name) {
        try {
            return load(insns, name, null);
        } catch (LastErrorException first) {
            Memory log = new Memory(1 << 16);
            log.clear();
            try {
                return load(insns, name, log);
            } catch (LastErrorException e) {
                throw new BpfException("BPF_PROG_LOAD of the cgroup device program", e,
                        log.getString(0, StandardCharsets.UTF_8.name()));
            }
        }
    }

    private int load(byte[] insns, String name, Memory log) {
        Memory code = new Memory(insns.length);
        code.write(0, insns, 0, insns.length);
        Memory license = new Memory(4);
        license.setString(0, "GPL", StandardCharsets.US_ASCII.name());
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, PROG_TYPE_CGROUP_DEVICE);
        attr.setInt(4, insns.length / 8);
        attr.setLong(8, Pointer.nativeValue(code));
        attr.setLong(16, Pointer.nativeValue(license));
        if (log != null) {
            attr.setInt(24, 1);
            attr.setInt(28, (int) log.size());
            attr.setLong(32, Pointer.nativeValue(log));
        }
        byte[] n = name.getBytes(StandardCharsets.US_ASCII);
        attr.write(48, n, 0, Math.min(n.length, 15));
        attr.setInt(68, CGROUP_DEVICE);
        return (int) call(PROG_LOAD, attr);
    }

    /** Attaches a program to a cgroup as a device program. */
    public void attach(int cgroupFd, int progFd, int flags, int replaceFd) {
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, cgroupFd);
        attr.setInt(4, progFd);
        attr.setInt(8, CGROUP_DEVICE);
        attr.setInt(12, flags);
        attr.setInt(16, replaceFd);
        try {
            call(PROG_ATTACH, attr);
        } catch (LastErrorException e) {
            throw new BpfException("BPF_PROG_ATTACH" + ((flags & F_REPLACE) != 0 ? " with BPF_F_REPLACE" : ""), e, "");
        }
    }

    /** Detaches one program from a cgroup. */
    public void detach(int cgroupFd, int progFd) {
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, cgroupFd);
        attr.setInt(4, progFd);
        attr.setInt(8, CGROUP_DEVICE);
        try {
            call(PROG_DETACH, attr);
        } catch (LastErrorException e) {
            throw new BpfException("BPF_PROG_DETACH", e, "");
        }
    }

    /** @return ids of the device programs attached to a cgroup (full zeroed attr: newer kernels write past prog_cnt) */
    public int[] query(int cgroupFd) {
        int capacity = 64;
        Memory ids = new Memory(4L * capacity);
        ids.clear();
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, cgroupFd);
        attr.setInt(4, CGROUP_DEVICE);
        attr.setLong(16, Pointer.nativeValue(ids));
        attr.setInt(24, capacity);
        try {
            call(PROG_QUERY, attr);
        } catch (LastErrorException e) {
            throw new BpfException("BPF_PROG_QUERY", e, "");
        }
        int n = Math.min(attr.getInt(24), capacity);
        return ids.getIntArray(0, n);
    }

    /** @return an fd for a program id (the caller closes it) */
    public int progFd(int id) {
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, id);
        try {
            return (int) call(PROG_GET_FD_BY_ID, attr);
        } catch (LastErrorException e) {
            throw new BpfException("BPF_PROG_GET_FD_BY_ID " + id, e, "");
        }
    }

    /** @return {id, name} of a program fd */
    public Object[] info(int progFd) {
        Memory info = new Memory(PROG_INFO_SIZE);
        info.clear();
        Memory attr = new Memory(ATTR_SIZE);
        attr.clear();
        attr.setInt(0, progFd);
        attr.setInt(4, PROG_INFO_SIZE);
        attr.setLong(8, Pointer.nativeValue(info));
        try {
            call(OBJ_GET_INFO_BY_FD, attr);
        } catch (LastErrorException e) {
            throw new BpfException("BPF_OBJ_GET_INFO_BY_FD", e, "");
        }
        byte[] name = info.getByteArray(PROG_INFO_NAME, 16);
        int len = 0;
        while (len < name.length && name[len] != 0) {
            len++;
        }
        return new Object[]{info.getInt(PROG_INFO_ID), new String(name, 0, len, StandardCharsets.US_ASCII)};
    }

    /** Closes an fd, ignoring errors. */
    public void close(int fd) {
        try {
            libc.close(fd);
        } catch (LastErrorException ignored) {
            // nothing to do
        }
    }

    /** Raises RLIMIT_MEMLOCK to infinity (kernels before 5.11 charge BPF memory against it). */
    public void raiseMemlock() {
        Memory r = new Memory(16);
        r.setLong(0, -1L);
        r.setLong(8, -1L);
        try {
            libc.setrlimit(Libc.RLIMIT_MEMLOCK, r);
        } catch (LastErrorException ignored) {
            // best effort: the load reports EPERM with its own message if the limit was the problem
        }
    }
}
