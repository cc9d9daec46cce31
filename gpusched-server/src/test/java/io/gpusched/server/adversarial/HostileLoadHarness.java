package io.gpusched.server.adversarial;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Measurements for docs/PERFORMANCE.md, run by hand as root (not a CI test): the latency of another client's
 * {@code GET /api/v1/node} over TCP (median and 99th percentile of 200 sequential requests) while one real user
 * (uid and gid given) floods the console and the node socket through {@link HostileClient}; and the memory and
 * threads 1,000 idle connections hold (root's, which the per-client limits let through). Each condition runs
 * {@code runs} times (default 5); medians and ranges are printed.
 *
 * <p>Arguments: {@code uid gid [runs]}. Class path: this module's test class path.
 */
public final class HostileLoadHarness {
    private HostileLoadHarness() {
    }

    public static void main(String[] args) throws Exception {
        long uid = Long.parseLong(args[0]);
        long gid = Long.parseLong(args[1]);
        int runs = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        Path tmp = Files.createTempDirectory("gpusched-hostile");
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        Path socket = tmp.resolve("run").resolve("gpusched.sock");
        Path classes = ClientLimitsAttackTest.copyHostileClient(tmp.resolve("hostile"));
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(Files.createDirectory(tmp.resolve("st")))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket).build()
                     .start()) {
            String tcp = "tcp:127.0.0.1:" + c.address().getPort();
            String unix = "unix:" + socket;
            String[][] conditions = {{"none", "", "0"}, {"half", unix, "300"}, {"half", unix, "1000"},
                {"half", tcp, "1000"}, {"body", unix, "1000"}, {"idle", tcp, "3000"}, {"streams", tcp, "1025"}};
            for (String[] cond : conditions) {
                double[] med = new double[runs];
                double[] p99 = new double[runs];
                for (int r = 0; r < runs; r++) {
                    Process p = cond[0].equals("none") ? null : attacker(uid, gid, classes, cond[0], cond[1], cond[2]);
                    long[] ns = victim(c, 200);
                    med[r] = ns[ns.length / 2] / 1e6;
                    p99[r] = ns[(int) (ns.length * 0.99)] / 1e6;
                    if (p != null) {
                        p.destroyForcibly();
                        p.waitFor(60, TimeUnit.SECONDS);
                    }
                    Thread.sleep(1500); // refused connections' one-second drain ends
                }
                System.out.printf("%-8s %-5s %5s  GET median %s ms  p99 %s ms%n", cond[0],
                        cond[1].isEmpty() ? "" : cond[1].substring(0, cond[1].indexOf(':')), cond[2], stat(med),
                        stat(p99));
            }
            idleCost(c, 1000);
        } finally {
            inv.close();
        }
    }

    /** @return "median [min-max]" of the values */
    static String stat(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return String.format("%.2f [%.2f-%.2f]", s[s.length / 2], s[0], s[s.length - 1]);
    }

    static Process attacker(long uid, long gid, Path classes, String mode, String target, String n)
            throws IOException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder("setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--", java,
                "-Xss256k", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", classes.toString(),
                HostileClient.class.getName(), mode, target, n).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String line = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))
                .readLine();
        System.out.println("  attacker " + mode + " " + target + " " + n + ": " + line);
        return p;
    }

    /** @return the sorted latencies of {@code n} sequential GETs, each on a new connection */
    static long[] victim(ConsoleServer c, int n) throws IOException {
        long[] ns = new long[n];
        byte[] req = "GET /api/v1/node HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                .getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            try (Socket s = new Socket(c.address().getAddress(), c.address().getPort())) {
                s.setSoTimeout(60_000);
                OutputStream out = s.getOutputStream();
                out.write(req);
                InputStream in = s.getInputStream();
                byte[] head = in.readNBytes(12);
                if (!new String(head, StandardCharsets.US_ASCII).endsWith("200")) {
                    throw new IOException("victim GET answered " + new String(head, StandardCharsets.US_ASCII));
                }
                in.readAllBytes();
            }
            ns[i] = System.nanoTime() - t0;
        }
        Arrays.sort(ns);
        return ns;
    }

    /** Prints the heap (after GC) and threads before and with {@code n} idle connections of root's. */
    static void idleCost(ConsoleServer c, int n) throws Exception {
        long heap0 = heapAfterGc();
        int threads0 = ManagementFactory.getThreadMXBean().getThreadCount();
        List<Socket> held = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            held.add(new Socket(c.address().getAddress(), c.address().getPort()));
        }
        Thread.sleep(2000);
        long heap1 = heapAfterGc();
        int threads1 = ManagementFactory.getThreadMXBean().getThreadCount();
        System.out.printf("%d idle connections: heap after GC %+.1f MiB (%.1f KiB each), threads %d -> %d%n", n,
                (heap1 - heap0) / 1048576.0, (heap1 - heap0) / 1024.0 / n, threads0, threads1);
        for (Socket s : held) {
            s.close();
        }
    }

    static long heapAfterGc() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(200);
        }
        Runtime r = Runtime.getRuntime();
        return r.totalMemory() - r.freeMemory();
    }
}
