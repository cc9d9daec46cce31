package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuTopology;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The generated gres.conf and node line of a simulated DGX-1 in a real Slurm (Debian's slurm-wlm 22.05: munged,
 * slurmctld, slurmd on local ports with a private state directory; fake GPU nodes made with mknod): sinfo shows the
 * GRES as generated, {@code srun --gres=gpu:2} gets two GPUs, a 2-GPU job gets an NVLinked pair whenever one is free
 * (judged here from the profile's links), and a gres.conf with one File removed is reported by
 * {@link SlurmGres#check} and by slurmd alike. Needs root and slurm-wlm + munge ({@code .ci/install-test-deps}).
 */
@Tag("root")
class SlurmRealTest {
    private static final String NODE = "gsnode";

    @Test
    void slurmAcceptsAndActsOnTheGeneratedGres() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root: slurmd and mknod run as root");
        for (String c : List.of("slurmctld", "slurmd", "munged", "sinfo", "srun", "sbatch", "scancel", "mknod")) {
            assumeTrue(Daemons.onPath(c), c + " is not installed (Debian: slurm-wlm, munge; .ci/install-test-deps)");
        }
        Path dir = Files.createTempDirectory(Path.of("/tmp"), "gpusched-slurm");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path dev = Files.createDirectories(dir.resolve("dev"));
        Path etc = Files.createDirectories(dir.resolve("etc"));
        Path log = Files.createDirectories(dir.resolve("log"));
        Files.createDirectories(dir.resolve("state"));
        Files.createDirectories(dir.resolve("spool"));
        Path conf = etc.resolve("slurm.conf");
        try {
            runSlurm(dir, dev, etc, log, conf);
        } finally {
            deleteTree(dir); // the daemons are stopped by now; a test leaves nothing under /tmp
        }
    }

    /** Removes the test's directory; a failure to is said, never thrown over the test's own failure. */
    private static void deleteTree(Path dir) {
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            System.err.println("SlurmRealTest: could not remove " + dir + ": " + e);
        }
    }

    private static void runSlurm(Path dir, Path dev, Path etc, Path log, Path conf) throws Exception {
        try (Daemons d = new Daemons(Map.of("SLURM_CONF", conf.toString()));
             GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (int i = 0; i < 8; i++) {
                assertThat(d.run(10, "mknod", dev.resolve("nvidia" + i).toString(), "c", "195",
                        String.valueOf(i)).exit()).isZero();
            }
            SlurmGres gres = SlurmGres.of(inv, new SlurmGres.Options(dev, Path.of("/proc"),
                    CpuLayout.fromSysfs(Path.of("/sys"))));
            Files.writeString(etc.resolve("gres.conf"), gres.gresConf());
            byte[] key = new byte[128];
            new java.security.SecureRandom().nextBytes(key);
            Path keyFile = dir.resolve("munge.key");
            Files.write(keyFile, key);
            Files.setPosixFilePermissions(keyFile, PosixFilePermissions.fromString("rw-------"));
            Path sock = dir.resolve("munge.sock");
            d.start(log.resolve("munged.log"), Daemons.path("munged"), "-F", "-f", "--socket=" + sock,
                    "--key-file=" + keyFile, "--log-file=" + log.resolve("munged.file.log"),
                    "--pid-file=" + dir.resolve("munged.pid"), "--seed-file=" + dir.resolve("munged.seed"));
            waitFor(() -> Files.exists(sock), Duration.ofSeconds(20), "munged socket " + sock);
            String host = d.run(10, "hostname", "-s").out().strip();
            String cpus = d.run(30, Daemons.path("slurmd"), "-C").out().lines()
                    .filter(l -> l.startsWith("NodeName=")).findFirst().orElseThrow()
                    .replaceFirst("^NodeName=\\S+\\s*", "").replaceAll("RealMemory=\\d+", "RealMemory=500");
            String nodeLine = gres.nodeLine(NODE) + " NodeHostname=" + host + " NodeAddr=127.0.0.1 " + cpus
                    + " State=UNKNOWN";
            Files.writeString(conf, String.join("\n",
                    "ClusterName=gpuschedtest",
                    "SlurmctldHost=" + host + "(127.0.0.1)",
                    "SlurmctldPort=" + freePort(),
                    "SlurmdPort=" + freePort(),
                    "SlurmUser=root", "SlurmdUser=root",
                    "AuthType=auth/munge", "AuthInfo=socket=" + sock,
                    "StateSaveLocation=" + dir.resolve("state"), "SlurmdSpoolDir=" + dir.resolve("spool"),
                    "SlurmctldPidFile=" + dir.resolve("slurmctld.pid"), "SlurmdPidFile=" + dir.resolve("slurmd.pid"),
                    "SlurmctldLogFile=" + log.resolve("slurmctld.log"), "SlurmdLogFile=" + log.resolve("slurmd.log"),
                    "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
                    "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
                    "MailProg=/bin/true",
                    // a batch job that cannot start at submit (the node still completing the last srun) is tried
                    // again by slurmctld's background loop only batch_sched_delay s later (default 3): 0 lets the
                    // next pass (each second) start it, so each holder job starts ~2 s sooner
                    "SchedulerParameters=batch_sched_delay=0",
                    SlurmGres.GRES_TYPES,
                    nodeLine,
                    "PartitionName=gpus Nodes=" + NODE + " Default=YES MaxTime=INFINITE State=UP", ""));
            Process ctld = d.start(log.resolve("slurmctld.out"), Daemons.path("slurmctld"), "-D", "-f",
                    conf.toString());
            Process slurmd = d.start(log.resolve("slurmd.out"), Daemons.path("slurmd"), "-D", "-N", NODE, "-f",
                    conf.toString());
            try {
                waitFor(() -> state(d).startsWith("idle"), Duration.ofSeconds(60),
                        "node " + NODE + " idle (" + logs(log) + ")");
                // sinfo shows the GRES as generated
                String sinfo = d.run(30, "sinfo", "-h", "-N", "-o", "%G").out().strip();
                assertThat(sinfo).startsWith(gres.gresValue());

                // srun --gres=gpu:2 gets two GPUs of the node
                Daemons.Result two = d.run(60, "srun", "--gres=gpu:2", "-c1", "env");
                assertThat(two.exit()).as(two.out()).isZero();
                List<Integer> got = visible(two.out());
                assertThat(got).hasSize(2).doesNotHaveDuplicates().allMatch(i -> i >= 0 && i < 8);

                // with GPUs held by a running job, a 2-GPU job gets an NVLinked pair whenever one is free
                GpuTopology topo = inv.topology();
                int judged = 0;
                for (int held = 1; held <= 6; held++) {
                    Path out = dir.resolve("holder" + held + ".out");
                    Daemons.Result sb = d.run(30, "sbatch", "--parsable", "--gres=gpu:" + held, "-c1", "-o",
                            out.toString(), "--wrap", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; sleep 600");
                    assertThat(sb.exit()).as(sb.out()).isZero();
                    String job = sb.out().strip().split(";")[0];
                    try {
                        waitFor(() -> Files.exists(out) && Files.readString(out).contains("CUDA_VISIBLE_DEVICES="),
                                Duration.ofSeconds(60), "holder job " + job + " running");
                        Set<Integer> heldSet = new TreeSet<>(visible(Files.readString(out)));
                        assertThat(heldSet).hasSize(held);
                        Daemons.Result pair = d.run(60, "srun", "--gres=gpu:2", "-c1", "env");
                        assertThat(pair.exit()).as(pair.out()).isZero();
                        List<Integer> p = visible(pair.out());
                        assertThat(p).hasSize(2).doesNotContainAnyElementsOf(heldSet);
                        boolean linkedFree = false;
                        for (int a = 0; a < 8; a++) {
                            for (int b = a + 1; b < 8; b++) {
                                linkedFree |= !heldSet.contains(a) && !heldSet.contains(b) && topo.linkCount(a, b) > 0;
                            }
                        }
                        if (linkedFree) {
                            judged++;
                            assertThat(topo.linkCount(p.get(0), p.get(1)))
                                    .as("held " + heldSet + ", Slurm gave " + p + "; an NVLinked pair was free")
                                    .isPositive();
                        }
                    } finally {
                        d.run(30, "scancel", job);
                        waitFor(() -> d.run(30, "squeue", "-h", "-j", job).out().isBlank(), Duration.ofSeconds(60),
                                "job " + job + " gone");
                    }
                }
                assertThat(judged).as("trials where a linked pair was free").isPositive();

                // one File removed: --check says so, and so does slurmd (the node goes invalid)
                List<String> lines = new ArrayList<>(Arrays.asList(gres.gresConf().split("\n")));
                String removed = dev.resolve("nvidia5").toString();
                lines.removeIf(l -> l.contains("File=" + removed + " "));
                String broken = String.join("\n", lines) + "\n";
                List<String> drift = gres.check(GresConfParser.parse(broken, Optional.of(NODE)));
                assertThat(drift).anySatisfy(x -> assertThat(x).startsWith("missing File=" + removed))
                        .anySatisfy(x -> assertThat(x).startsWith("wrong count: gres.conf has 7"));
                Files.writeString(etc.resolve("gres.conf"), broken);
                d.stop(slurmd);
                slurmd = d.start(log.resolve("slurmd2.out"), Daemons.path("slurmd"), "-D", "-N", NODE, "-f",
                        conf.toString());
                waitFor(() -> d.run(30, "sinfo", "-h", "-N", "-o", "%T %E").out().contains("count reported lower"),
                        Duration.ofSeconds(60), "slurmd to report the missing GPU (" + logs(log) + ")");
                assertThat(d.run(30, "sinfo", "-h", "-N", "-o", "%E").out()).contains("(7 < 8)");
            } finally {
                d.run(30, "scancel", "-p", "gpus");
                d.stop(slurmd);
                d.stop(ctld);
            }
        }
    }

    private static String state(Daemons d) throws IOException, InterruptedException {
        return d.run(30, "sinfo", "-h", "-N", "-o", "%T").out().strip();
    }

    private static List<Integer> visible(String env) {
        return env.lines().filter(l -> l.startsWith("CUDA_VISIBLE_DEVICES=")).findFirst()
                .map(l -> Arrays.stream(l.substring("CUDA_VISIBLE_DEVICES=".length()).strip().split(","))
                        .filter(s -> !s.isEmpty()).map(Integer::parseInt).collect(Collectors.toList()))
                .orElseThrow(() -> new AssertionError("no CUDA_VISIBLE_DEVICES in:\n" + env));
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static String logs(Path log) {
        StringBuilder b = new StringBuilder();
        try (var files = Files.list(log)) {
            for (Path f : files.sorted().toList()) {
                List<String> l = Files.readAllLines(f);
                b.append("\n--- ").append(f.getFileName()).append('\n')
                        .append(String.join("\n", l.subList(Math.max(0, l.size() - 15), l.size())));
            }
        } catch (IOException e) {
            b.append(e);
        }
        return b.toString();
    }

    interface Check {
        boolean ok() throws Exception;
    }

    static void waitFor(Check c, Duration max, String what) throws Exception {
        Instant end = Instant.now().plus(max);
        while (Instant.now().isBefore(end)) {
            if (c.ok()) {
                return;
            }
            Thread.sleep(250);
        }
        throw new AssertionError("timed out waiting for " + what);
    }
}
