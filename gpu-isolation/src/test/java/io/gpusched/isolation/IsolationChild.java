package io.gpusched.isolation;

import com.sun.jna.LastErrorException;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.isolation.internal.Libc;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Child JVMs for the isolation tests.
 *
 * <p>{@code racer SHARED PROCS... -- NODE...}: joins the cgroups (writes its pid to each {@code cgroup.procs}), then
 * opens every node in a tight loop until told to stop. Around each open it reads the parent's sequence number; the
 * parent publishes, before each change of the fence, the set of nodes permitted during the change (old ∪ new) and,
 * after it, the new set. An open that passes the device cgroup (anything but EPERM) of a node outside the union of
 * the sets published between the two reads is a breach. The child counts; the parent only reads the counts.
 *
 * <p>{@code fence CGROUP DEV PROC GPU [MECHANISM STATE_DIR [STALL_AFTER]]}: fences a cgroup (v2 unless told) for one
 * GPU of the 4-GPU fixture host, prints {@code FENCED} and waits to be killed. With {@code STALL_AFTER} n &gt; 0 (v1)
 * the n-th rule write is followed by {@code STALLED} and a wait: the child is killed in the middle of its fence.
 *
 * <p>{@code fencer CGROUP DEV PROC MECHANISM STATE_DIR GO ROUNDS SEED}: prints {@code READY}, waits for file
 * {@code GO}, then fences the cgroup for a random one or two GPUs per round, printing {@code ACK round OK i,j} or
 * {@code ACK round FAIL message} as each call returns, and {@code DONE} at the end; the fence stays when it exits.
 */
public final class IsolationChild {
    static final int STOP = 0;
    static final int SEQ = 4;
    static final int BREACHES = 8;
    static final int READY = 12;
    static final int TRIED = 16;
    static final int MASKS = 64;
    static final int SIZE = 1 << 20;
    static final VarHandle INT = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    static final int EPERM = 1;
    /** Set in a published mask while a change is under way. */
    static final int DURING = 1 << 30;

    private IsolationChild() {
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("racer")) {
            racer(args);
        } else if (args[0].equals("fence")) {
            fence(args);
        } else if (args[0].equals("fencer")) {
            fencer(args);
        } else {
            throw new IllegalArgumentException("mode racer, fence or fencer, was " + args[0]);
        }
    }

    static MappedByteBuffer map(Path shared) throws IOException {
        try (FileChannel ch = FileChannel.open(shared, StandardOpenOption.READ, StandardOpenOption.WRITE,
                StandardOpenOption.CREATE)) {
            return ch.map(FileChannel.MapMode.READ_WRITE, 0, SIZE);
        }
    }

    static void racer(String[] args) throws Exception {
        MappedByteBuffer b = map(Path.of(args[1]));
        List<String> nodes = new ArrayList<>();
        int i = 2;
        for (; !args[i].equals("--"); i++) {
            Files.writeString(Path.of(args[i]), String.valueOf(ProcessHandle.current().pid()));
        }
        for (i++; i < args.length; i++) {
            nodes.add(args[i]);
        }
        Libc libc = Libc.Holder.get();
        long tried = 0;
        long[] passed = new long[nodes.size()];
        long[] refused = new long[nodes.size()];
        int breaches = 0;
        long racing = 0;
        StringBuilder firstBreaches = new StringBuilder();
        int maxSeq = (SIZE - MASKS) / 4 - 1;
        boolean first = true;
        while ((int) INT.getVolatile(b, STOP) == 0) {
            for (int n = 0; n < nodes.size(); n++) {
                int s1 = (int) INT.getVolatile(b, SEQ);
                boolean ok;
                try {
                    int fd = libc.open(nodes.get(n), 0x80000);
                    libc.close(fd);
                    ok = true;
                } catch (LastErrorException e) {
                    ok = e.getErrorCode() != EPERM;
                }
                int s2 = (int) INT.getVolatile(b, SEQ);
                tried++;
                for (int s = s1; s <= Math.min(s2, maxSeq); s++) {
                    if (((int) INT.getVolatile(b, MASKS + 4 * s) & DURING) != 0) {
                        racing++;
                        break;
                    }
                }
                if (!ok) {
                    refused[n]++;
                    continue;
                }
                passed[n]++;
                int permitted = 0;
                for (int s = s1; s <= Math.min(s2, maxSeq); s++) {
                    permitted |= (int) INT.getVolatile(b, MASKS + 4 * s);
                }
                if ((permitted & (1 << n)) == 0) {
                    breaches++;
                    INT.setVolatile(b, BREACHES, breaches);
                    if (breaches <= 5) {
                        firstBreaches.append("BREACH ").append(nodes.get(n)).append(" seq ").append(s1).append("..")
                                .append(s2).append(" permitted ").append(Integer.toBinaryString(permitted))
                                .append('\n');
                    }
                }
            }
            b.putLong(TRIED, tried);
            if (first) {
                INT.setVolatile(b, READY, 1);
                first = false;
            }
        }
        StringBuilder out = new StringBuilder(firstBreaches);
        out.append("RACER tried=").append(tried).append(" during-a-change=").append(racing).append(" breaches=")
                .append(breaches).append(" passed=");
        for (long p : passed) {
            out.append(p).append(',');
        }
        out.append(" refused=");
        for (long r : refused) {
            out.append(r).append(',');
        }
        System.out.println(out);
        System.out.flush();
    }

    static void fence(String[] args) throws Exception {
        SimulatedGpuInventory host = Fixtures.nvidiaHost();
        GpuScheduler s = Fixtures.scheduler(host);
        CgroupDeviceIsolator.Builder b = CgroupDeviceIsolator.builder().hostDevices(host.devices())
                .devRoot(Path.of(args[2])).procRoot(Path.of(args[3])).mechanism(CgroupDeviceIsolator.Mechanism.V2);
        if (args.length > 5) {
            b.mechanism(CgroupDeviceIsolator.Mechanism.valueOf(args[5])).stateDir(Path.of(args[6]));
        }
        int stallAfter = args.length > 7 ? Integer.parseInt(args[7]) : 0;
        if (stallAfter > 0) {
            java.util.concurrent.atomic.AtomicInteger n = new java.util.concurrent.atomic.AtomicInteger();
            V1Fence.writer = (file, line) -> {
                V1Fence.KERNEL.write(file, line);
                if (n.incrementAndGet() == stallAfter) {
                    System.out.println("STALLED after '" + line + "'");
                    System.out.flush();
                    try {
                        Thread.sleep(600_000);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            };
        }
        b.build().fence(Path.of(args[1]), Fixtures.gpus(s, Integer.parseInt(args[4])));
        System.out.println("FENCED");
        System.out.flush();
        Thread.sleep(600_000);
    }

    static void fencer(String[] args) throws Exception {
        SimulatedGpuInventory host = Fixtures.nvidiaHost();
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(Path.of(args[2]))
                .procRoot(Path.of(args[3])).mechanism(CgroupDeviceIsolator.Mechanism.valueOf(args[4]))
                .stateDir(Path.of(args[5])).build();
        Path go = Path.of(args[6]);
        int rounds = Integer.parseInt(args[7]);
        java.util.Random r = new java.util.Random(Long.parseLong(args[8]));
        System.out.println("READY");
        System.out.flush();
        while (!Files.exists(go)) {
            Thread.onSpinWait();
        }
        for (int i = 0; i < rounds; i++) {
            int a = r.nextInt(4);
            int b = r.nextInt(4);
            List<io.gpusched.core.GpuDevice> devs = a == b || r.nextBoolean() ? List.of(host.devices().get(a))
                    : List.of(host.devices().get(Math.min(a, b)), host.devices().get(Math.max(a, b)));
            io.gpusched.core.Allocation alloc = new io.gpusched.core.Allocation("child-" + args[8] + "-" + i, devs,
                    io.gpusched.core.GpuRequest.builder().count(devs.size()).build(), java.time.Instant.now());
            String ids = String.join(",", devs.stream().map(d -> String.valueOf(d.index())).toList());
            try {
                iso.fence(Path.of(args[1]), alloc);
                System.out.println("ACK " + i + " OK " + ids);
            } catch (RuntimeException e) {
                System.out.println("ACK " + i + " FAIL " + ids + " " + e.getMessage().replace('\n', ' '));
            }
            System.out.flush();
        }
        System.out.println("DONE");
        System.out.flush();
    }

    /** @return a command line running this class in a fresh JVM with the test classpath */
    static List<String> command(String... args) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                IsolationChild.class.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }
}
