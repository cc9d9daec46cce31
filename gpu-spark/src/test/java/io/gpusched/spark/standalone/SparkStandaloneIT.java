package io.gpusched.spark.standalone;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.testing.ClassPathEntry;
import io.gpusched.testing.LedgerReader;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Spark standalone as deployed: a Master and two Workers, each a JVM of its own started from Spark's main classes,
 * with a Spark home whose {@code jars/} holds Spark's class path (spark-core and its dependencies from Maven) and the
 * drop-in {@code gpusched-spark-<version>.jar} alone, and whose {@code conf/spark-defaults.conf} is the README's
 * Spark standalone lines as pasted (the state directory and the inventory pointed at this test's simulated DGX-1).
 * An application (a driver JVM, client mode) runs tasks on executors the Workers launch; each task reports its
 * executor, the executor's parent (its Worker) and its GPU addresses.
 *
 * <p>Checked with {@link LedgerReader}, which parses the ledger file itself: each Worker holds 4 GPUs, the two sets
 * are disjoint; every executor's addresses lie within its own Worker's set. After SIGKILL of one Worker a third
 * Worker gets exactly the dead one's GPUs (the ledger records them reclaimed from the dead pid). After the Workers
 * are stopped (SIGTERM, as {@code stop-worker.sh} does), the ledger holds nothing and their allocations ended
 * {@code RELEASED} by the Workers themselves.
 */
class SparkStandaloneIT {
    private static final long WAIT_S = 90;
    /**
     * Added to every JVM of the cluster (the executors' through {@code spark.executor.extraJavaOptions}): less
     * start-up work for JVMs that live seconds on a 2-core machine (the C1 compiler alone, one GC thread); nothing
     * Spark or gpusched does depends on them.
     */
    private static final List<String> FAST_START = List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    @TempDir
    Path tmp;
    private final List<Process> children = new ArrayList<>();
    private Path sparkHome;
    private Path state;
    private Path logs;

    @AfterEach
    void killChildren() throws InterruptedException {
        for (Process p : children) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
        for (Process p : children) {
            p.waitFor(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void workersGetDisjointGpusExecutorsUseTheirWorkersAndGpusComeBackAfterStopAndSigkill() throws Exception {
        Path dropIn = Path.of(System.getProperty("gpusched.dropInJar", "target/missing.jar"));
        assumeTrue(Files.isRegularFile(dropIn), "the drop-in jar " + dropIn + " is built by `package`; run this "
                + "test with failsafe (mvn verify)");
        setUpSparkHome(dropIn);

        int masterPort = freePort();
        String master = "spark://127.0.0.1:" + masterPort;
        Process m = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                String.valueOf(masterPort), "--webui-port", "0");
        awaitLog("master", "I have been elected leader", m);
        Process w1 = worker("worker-1", master);
        Process w2 = worker("worker-2", master);
        awaitLog("worker-1", "Successfully registered with master", w1);
        awaitLog("worker-2", "Successfully registered with master", w2);

        Map<String, Integer> index = indexByUuid();
        Map<Long, List<String>> held = LedgerReader.read(state).byHolder();
        Set<Integer> g1 = indices(held.get(w1.pid()), index);
        Set<Integer> g2 = indices(held.get(w2.pid()), index);
        assertThat(held).as("ledger holders").containsOnlyKeys(w1.pid(), w2.pid());
        assertThat(g1).hasSize(4).doesNotContainAnyElementsOf(g2);
        assertThat(g2).hasSize(4);

        // an application: its executors are launched by the Workers and get addresses out of their Worker's set
        // submitted as spark-submit does (SparkSubmit reads conf/spark-defaults.conf; executors fetch the app jar)
        Process app = start("app", "org.apache.spark.deploy.SparkSubmit", "--master", master, "--class",
                StandaloneGpuApp.class.getName(), "--conf", "spark.driver.host=127.0.0.1", "--conf",
                "spark.ui.enabled=false", "--conf", "spark.cores.max=4", "--conf", "spark.executor.memory=512m",
                "--conf", "spark.executor.extraJavaOptions=" + String.join(" ", FAST_START),
                "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0", "--conf",
                "spark.scheduler.maxRegisteredResourcesWaitingTime=120s", appJar().toString());
        assertThat(app.waitFor(WAIT_S + 60, TimeUnit.SECONDS)).as("the application ends; log: %s",
                log("app")).isTrue();
        assertThat(app.exitValue()).as("application exit; log: %s", log("app")).isZero();
        Map<Long, Set<Integer>> byWorker = new HashMap<>();
        Set<String> executors = new HashSet<>();
        for (String line : Files.readAllLines(logs.resolve("app.out"))) {
            if (!line.startsWith("EXECUTOR ")) {
                continue;
            }
            String[] f = line.split(" ");
            executors.add(f[1]);
            long ppid = Long.parseLong(f[3]);
            for (String a : f[4].split(",")) {
                byWorker.computeIfAbsent(ppid, k -> new TreeSet<>()).add(Integer.valueOf(a));
            }
        }
        assertThat(executors).as("executors that ran tasks").hasSize(2);
        assertThat(byWorker).as("executors by launching Worker").containsOnlyKeys(w1.pid(), w2.pid());
        assertThat(byWorker.get(w1.pid())).isNotEmpty().isSubsetOf(g1);
        assertThat(byWorker.get(w2.pid())).isNotEmpty().isSubsetOf(g2);

        // SIGKILL: nothing runs the dead Worker's hooks; the next Worker that asks gets its GPUs
        w1.destroyForcibly();
        assertThat(w1.waitFor(30, TimeUnit.SECONDS)).isTrue();
        Process w3 = worker("worker-3", master);
        awaitLog("worker-3", "Successfully registered with master", w3);
        LedgerReader after = LedgerReader.read(state);
        assertThat(after.byHolder()).as("after SIGKILL: %s", after).containsOnlyKeys(w2.pid(), w3.pid());
        assertThat(indices(after.byHolder().get(w3.pid()), index)).isEqualTo(g1);
        assertThat(after.ended).as("the dead Worker's allocation")
                .anyMatch(e -> e.pid() == w1.pid() && e.cause().equals("RECLAIMED"));

        // a clean stop (SIGTERM, what stop-worker.sh sends): each Worker gives its GPUs back itself
        w2.destroy();
        w3.destroy();
        assertThat(w2.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(w3.waitFor(60, TimeUnit.SECONDS)).isTrue();
        LedgerReader end = LedgerReader.read(state);
        assertThat(end.live).as("after the Workers stopped: %s", end).isEmpty();
        assertThat(end.ended).filteredOn(e -> e.pid() == w2.pid() || e.pid() == w3.pid())
                .hasSize(2).allMatch(e -> e.cause().equals("RELEASED"));
    }

    // ---------------------------------------------------------------------------------------------------------

    /** Spark's class path in {@code jars/} (links), the drop-in jar beside it, the README's lines in conf/. */
    private void setUpSparkHome(Path dropIn) throws IOException {
        sparkHome = Files.createDirectories(tmp.resolve("spark-home"));
        Path jars = Files.createDirectories(sparkHome.resolve("jars"));
        // surefire and failsafe start the test JVM through a manifest-only jar; the real class path is this property
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        for (String e : cp.split(File.pathSeparator)) {
            if (isSparkDistribution(e)) {
                Path p = Path.of(e);
                Path link = jars.resolve(p.getFileName().toString());
                if (!Files.exists(link)) {
                    Files.createSymbolicLink(link, p.toAbsolutePath());
                }
            }
        }
        Files.createSymbolicLink(jars.resolve(dropIn.getFileName()), dropIn.toAbsolutePath());
        state = Files.createDirectories(tmp.resolve("state"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        logs = Path.of("target", "it-logs", "spark-standalone").toAbsolutePath(); // kept for a failure's reader
        if (Files.isDirectory(logs)) {
            try (var old = Files.list(logs)) {
                for (Path f : (Iterable<Path>) old::iterator) {
                    Files.delete(f);
                }
            }
        }
        Files.createDirectories(logs);
        Path conf = Files.createDirectories(sparkHome.resolve("conf"));
        Files.writeString(conf.resolve("spark-defaults.conf"), readmeStandaloneLines(state));
    }

    /**
     * @return the README's Spark standalone blocks (the Worker's and the application's), as pasted, with the state
     *         directory and the inventory pointed at this test's node
     */
    static String readmeStandaloneLines(Path state) throws IOException {
        String text = Files.readString(Paths.get("..", "README.md"), StandardCharsets.UTF_8);
        int sec = text.indexOf("### Spark (`gpu-spark`)");
        int end = text.indexOf("\n### ", sec + 1);
        String spark = text.substring(sec, end < 0 ? text.length() : end);
        StringBuilder out = new StringBuilder();
        for (String marker : List.of("spark.worker.resource.gpu.amount", "spark.executor.cores")) {
            int at = spark.indexOf(marker);
            assertThat(at).as("README's Spark section has a block with " + marker).isPositive();
            int start = spark.lastIndexOf("```", at);
            out.append(spark, spark.indexOf('\n', start) + 1, spark.indexOf("```", at)).append('\n');
        }
        return out.toString().replace("/var/lib/gpusched", state.toString())
                .replaceAll("(?m)^(spark\\.gpusched\\.inventory\\s+)auto", "$1simulated:dgx1-v100")
                + (out.toString().contains("spark.gpusched.inventory") ? ""
                        : "spark.gpusched.inventory             simulated:dgx1-v100\n");
    }

    /** @return whether a class path entry is part of what Spark brings (not gpusched, not the test tools) */
    private static boolean isSparkDistribution(String entry) {
        // by what each entry is (ClassPathEntry), never by words in its path: a local repository inside the checkout
        // or under a directory named junit or gpusched changes nothing (issue 32)
        ClassPathEntry e = ClassPathEntry.of(entry);
        if (!e.isJar() || e.isGpusched()) {
            return false; // this build's own jars and classes
        }
        return !e.isTestTool() && !e.isArtifact("jna", "jna-platform", "snakeyaml", "slf4j-simple");
    }

    private Process worker(String name, String master) throws IOException {
        return start(name, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                "--memory", "1g", "--webui-port", "0", "--work-dir", tmp.resolve(name).toString(), master);
    }

    private Process start(String name, String mainClass, String... args) throws IOException {
        return start(name, mainClass, List.of(), args);
    }

    private Process start(String name, String mainClass, List<String> extraCp, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String o : System.getProperty("spark.java.options", "").split(" ")) {
            if (!o.isBlank()) {
                cmd.add(o);
            }
        }
        List<String> sysProps = new ArrayList<>();
        List<String> mainArgs = new ArrayList<>();
        for (String a : args) {
            (a.startsWith("-D") ? sysProps : mainArgs).add(a);
        }
        cmd.add(name.equals("app") ? "-Xmx600m" : "-Xmx384m"); // Spark wants 450 MiB for a driver
        cmd.addAll(FAST_START);
        cmd.addAll(sysProps);
        List<String> cp = new ArrayList<>(List.of(sparkHome.resolve("jars") + "/*"));
        cp.addAll(extraCp);
        cmd.addAll(List.of("-cp", String.join(File.pathSeparator, cp), mainClass));
        cmd.addAll(mainArgs);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(logs.resolve(name + ".log").toFile())
                .redirectOutput(logs.resolve(name + ".out").toFile());
        pb.environment().put("SPARK_HOME", sparkHome.toString());
        pb.environment().put("SPARK_CONF_DIR", sparkHome.resolve("conf").toString());
        pb.environment().put("SPARK_SCALA_VERSION", "2.13");
        pb.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
        pb.environment().remove("SPARK_TESTING");
        pb.environment().remove("GPUSCHED_STATE_DIR");
        Process p = pb.start();
        children.add(p);
        return p;
    }

    /** @return a jar of the application's classes, as a user submits it */
    private Path appJar() throws IOException {
        Path jar = tmp.resolve("gpu-app.jar");
        Path classes = Path.of("target", "test-classes").toAbsolutePath();
        String pkg = StandaloneGpuApp.class.getPackageName().replace('.', '/');
        try (var out = new java.util.jar.JarOutputStream(Files.newOutputStream(jar)); var files =
                Files.list(classes.resolve(pkg))) {
            for (Path f : (Iterable<Path>) files::iterator) {
                if (f.getFileName().toString().startsWith(StandaloneGpuApp.class.getSimpleName())) {
                    out.putNextEntry(new java.util.jar.JarEntry(pkg + "/" + f.getFileName()));
                    out.write(Files.readAllBytes(f));
                    out.closeEntry();
                }
            }
        }
        return jar;
    }

    private String log(String name) {
        try {
            String l = Files.readString(logs.resolve(name + ".log"));
            return l.length() > 6000 ? l.substring(l.length() - 6000) : l;
        } catch (IOException e) {
            return e.toString();
        }
    }

    private void awaitLog(String name, String text, Process p) throws InterruptedException {
        await(() -> log(name).contains(text), p, name + " logs \"" + text + "\"");
    }

    private void await(BooleanSupplier c, Process p, String what) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (!c.getAsBoolean()) {
            if (!p.isAlive()) {
                throw new AssertionError(what + ": the process exited " + p.exitValue() + "; log: " + log(nameOf(p)));
            }
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(200);
        }
    }

    private String nameOf(Process p) {
        String[] names = {"master", "worker-1", "worker-2", "app", "worker-3"};
        int i = children.indexOf(p);
        return i >= 0 && i < names.length ? names[i] : "master";
    }

    private static Map<String, Integer> indexByUuid() {
        Map<String, Integer> m = new HashMap<>();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (GpuDevice d : inv.devices()) {
                m.put(d.uuid(), d.index());
            }
        }
        return m;
    }

    private static Set<Integer> indices(List<String> uuids, Map<String, Integer> index) {
        assertThat(uuids).as("a holding in the ledger").isNotNull();
        Set<Integer> out = new TreeSet<>();
        uuids.forEach(u -> out.add(index.get(u)));
        return out;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
