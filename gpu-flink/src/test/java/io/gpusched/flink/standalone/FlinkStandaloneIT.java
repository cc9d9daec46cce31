package io.gpusched.flink.standalone;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

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
 * Flink standalone as deployed: a session cluster of a JobManager ({@code StandaloneSessionClusterEntrypoint}) and
 * two TaskManagers ({@code TaskManagerRunner}), each a JVM of its own, started as Flink's {@code jobmanager.sh} and
 * {@code taskmanager.sh} start them: JVM memory options and dynamic properties from Flink's {@code BashJavaUtils}, the
 * class path Flink's own jars in {@code lib/} (flink-runtime, flink-clients, flink-streaming-java, the RPC loader and
 * their dependencies, from Maven; flink-dist is not on Maven Central here, and slf4j-simple stands in for the
 * distribution's log4j binding), {@code FLINK_PLUGINS_DIR} holding the drop-in {@code gpusched-flink-<version>.jar}
 * alone in {@code plugins/gpusched/}, and {@code conf/config.yaml} the README's Flink lines as pasted (state directory
 * and inventory pointed at this test's simulated DGX-1, the amount raised from 2 to 4 so that two TaskManagers take
 * the whole node) plus the cluster's addresses, small memory sizes and a short pause before a TaskManager asks the
 * ResourceManager again (the TaskManagers start with the JobManager, the job's client once its REST endpoint is up).
 * A job submitted with Flink's command line ({@code flink run}: {@code CliFrontend} in a client JVM) reports, from
 * each operator subtask, its TaskManager's pid and {@code getRuntimeContext().getExternalResourceInfos("gpu")}.
 *
 * <p>Checked with {@link LedgerReader}, which parses the ledger file itself: each TaskManager holds 4 GPUs, the two
 * sets are disjoint and are exactly what the operators in that TaskManager saw. After SIGKILL of one TaskManager a
 * third gets exactly the dead one's GPUs (the ledger records them reclaimed). After a clean stop (SIGTERM, what
 * {@code taskmanager.sh stop} sends) the ledger holds nothing and each TaskManager's allocation ended
 * {@code RELEASED} by the TaskManager itself.
 */
class FlinkStandaloneIT {
    private static final long WAIT_S = 180;
    private static final String REGISTERED = "Successful registration at resource manager";
    /**
     * The JVM options Flink's distribution sets in its default {@code config.yaml} ({@code env.java.opts.all}) and its
     * scripts pass to every Flink JVM (Flink 2.1 on Java 17 needs them: the client's job translation opens
     * {@code java.util}).
     */
    private static final String JAVA_OPTS = "--add-exports=java.base/sun.net.util=ALL-UNNAMED"
            + " --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED"
            + " --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED"
            + " --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED"
            + " --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED"
            + " --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED"
            + " --add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED"
            + " --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED"
            + " --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED"
            + " --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED";

    /**
     * Added to every JVM this test starts: less start-up work for JVMs that live seconds on a 2-core machine (the
     * C1 compiler alone, one GC thread); nothing Flink or gpusched does depends on them.
     */
    private static final List<String> FAST_START = List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    @TempDir
    Path tmp;
    private final List<Process> children = new ArrayList<>();
    private final Map<Process, String> names = new HashMap<>();
    private Path flinkHome;
    private Path conf;
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
    void taskManagersGetDisjointGpusOperatorsSeeThemAndGpusComeBackAfterStopAndSigkill() throws Exception {
        Path dropIn = Path.of(System.getProperty("gpusched.dropInJar", "target/missing.jar"));
        assumeTrue(Files.isRegularFile(dropIn), "the drop-in jar " + dropIn + " is built by `package`; run this "
                + "test with failsafe (mvn verify)");
        setUpFlinkHome(dropIn);

        // independent start-ups at once (the machine mostly waits on each): both BashJavaUtils runs; then the
        // JobManager and the TaskManagers together (a TaskManager that finds no ResourceManager yet retries after
        // cluster.registration.error-delay, set in clusterLines); the job's client once the REST endpoint listens
        Process jmUtils = resourceParamsProcess("GET_JM_RESOURCE_PARAMS");
        Process tmUtils = resourceParamsProcess("GET_TM_RESOURCE_PARAMS");
        List<List<String>> jmParams = resourceParams("GET_JM_RESOURCE_PARAMS", jmUtils);
        List<List<String>> tmParams = resourceParams("GET_TM_RESOURCE_PARAMS", tmUtils);
        Process jm = start("jobmanager", "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
                jmParams, "--configDir", conf.toString());
        Process tm1 = taskManager("taskmanager-1", tmParams);
        Process tm2 = taskManager("taskmanager-2", tmParams);
        awaitLog("jobmanager", "Rest endpoint listening at", jm);
        // a job, submitted as `flink run` does; its operators run in both TaskManagers and see their GPUs (its 4
        // subtasks form one pipelined region: scheduled only once all 4 slots, so both TaskManagers, are there)
        Process client = start("client", "org.apache.flink.client.cli.CliFrontend", List.of(List.of(), List.of()),
                "run", "-c", StandaloneGpuJob.class.getName(), jobJar().toString());
        awaitLog("taskmanager-1", REGISTERED, tm1);
        awaitLog("taskmanager-2", REGISTERED, tm2);

        Map<Long, List<String>> held = LedgerReader.read(state).byHolder();
        assertThat(held).as("ledger holders").containsOnlyKeys(tm1.pid(), tm2.pid());
        Set<String> g1 = new TreeSet<>(held.get(tm1.pid()));
        Set<String> g2 = new TreeSet<>(held.get(tm2.pid()));
        assertThat(g1).hasSize(4).doesNotContainAnyElementsOf(g2);
        assertThat(g2).hasSize(4);

        assertThat(client.waitFor(WAIT_S + 30, TimeUnit.SECONDS)).as("the job ends; log: %s", log("client")).isTrue();
        assertThat(client.exitValue()).as("client exit; log: %s", log("client")).isZero();
        Map<Long, Set<String>> byTaskManager = new HashMap<>();
        Set<String> subtasks = new TreeSet<>();
        for (String line : Files.readAllLines(logs.resolve("client.out"))) {
            if (!line.startsWith("OPERATOR ")) {
                continue;
            }
            String[] f = line.split(" ", -1);
            subtasks.add(f[1]);
            Set<String> seen = new TreeSet<>(f[3].isEmpty() ? List.of() : List.of(f[3].split(",")));
            Set<String> before = byTaskManager.putIfAbsent(Long.parseLong(f[2]), seen);
            assertThat(before == null ? seen : before).as("operators of one TaskManager see one set").isEqualTo(seen);
        }
        assertThat(subtasks).as("subtasks that reported; client output: %s", Files.readString(
                logs.resolve("client.out"))).containsExactly("0", "1", "2", "3");
        assertThat(byTaskManager).as("operators by TaskManager").containsOnlyKeys(tm1.pid(), tm2.pid());
        assertThat(byTaskManager.get(tm1.pid())).isEqualTo(g1);
        assertThat(byTaskManager.get(tm2.pid())).isEqualTo(g2);

        // SIGKILL: nothing runs the dead TaskManager's hooks; the next TaskManager that asks gets its GPUs
        tm1.destroyForcibly();
        assertThat(tm1.waitFor(30, TimeUnit.SECONDS)).isTrue();
        Process tm3 = taskManager("taskmanager-3", tmParams);
        awaitLog("taskmanager-3", REGISTERED, tm3);
        LedgerReader after = LedgerReader.read(state);
        assertThat(after.byHolder()).as("after SIGKILL: %s", after).containsOnlyKeys(tm2.pid(), tm3.pid());
        assertThat(new TreeSet<>(after.byHolder().get(tm3.pid()))).isEqualTo(g1);
        assertThat(after.ended).as("the dead TaskManager's allocation")
                .anyMatch(e -> e.pid() == tm1.pid() && e.cause().equals("RECLAIMED"));

        // a clean stop (SIGTERM, what `taskmanager.sh stop` sends): each TaskManager gives its GPUs back itself
        tm2.destroy();
        tm3.destroy();
        assertThat(tm2.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(tm3.waitFor(60, TimeUnit.SECONDS)).isTrue();
        LedgerReader end = LedgerReader.read(state);
        assertThat(end.live).as("after the TaskManagers stopped: %s", end).isEmpty();
        assertThat(end.ended).filteredOn(e -> e.pid() == tm2.pid() || e.pid() == tm3.pid())
                .hasSize(2).allMatch(e -> e.cause().equals("RELEASED"));
        jm.destroy();
        assertThat(jm.waitFor(60, TimeUnit.SECONDS)).isTrue();
    }

    // ---------------------------------------------------------------------------------------------------------

    /** Flink's class path in {@code lib/} (links), the drop-in jar alone in a plugin directory, the README's lines. */
    private void setUpFlinkHome(Path dropIn) throws IOException {
        flinkHome = Files.createDirectories(tmp.resolve("flink-home"));
        Path lib = Files.createDirectories(flinkHome.resolve("lib"));
        // surefire and failsafe start the test JVM through a manifest-only jar; the real class path is this property
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        for (String e : cp.split(File.pathSeparator)) {
            if (isFlinkDistribution(e)) {
                Path p = Path.of(e);
                Path link = lib.resolve(p.getFileName().toString());
                if (!Files.exists(link)) {
                    Files.createSymbolicLink(link, p.toAbsolutePath());
                }
            }
        }
        Path plugin = Files.createDirectories(flinkHome.resolve("plugins").resolve("gpusched"));
        Files.createSymbolicLink(plugin.resolve(dropIn.getFileName()), dropIn.toAbsolutePath());
        state = Files.createDirectories(tmp.resolve("state"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        logs = Path.of("target", "it-logs", "flink-standalone").toAbsolutePath(); // kept for a failure's reader
        if (Files.isDirectory(logs)) {
            try (var old = Files.list(logs)) {
                for (Path f : (Iterable<Path>) old::iterator) {
                    Files.delete(f);
                }
            }
        }
        Files.createDirectories(logs);
        conf = Files.createDirectories(flinkHome.resolve("conf"));
        Files.writeString(conf.resolve("config.yaml"), readmeFlinkLines(state) + clusterLines());
    }

    /**
     * @return the README's Flink {@code config.yaml} block, as pasted, with the state directory and the inventory
     *         pointed at this test's node and 4 GPUs per TaskManager (two TaskManagers take the whole DGX-1)
     */
    static String readmeFlinkLines(Path state) throws IOException {
        String text = Files.readString(Paths.get("..", "README.md"), StandardCharsets.UTF_8);
        int sec = text.indexOf("### Flink (`gpu-flink`)");
        assertThat(sec).as("README has a Flink section").isNotNegative();
        int at = text.indexOf("external-resource.gpu.driver-factory.class", sec);
        assertThat(at).as("README's Flink section has the config.yaml block").isPositive();
        int start = text.lastIndexOf("```", at);
        String block = text.substring(text.indexOf('\n', start) + 1, text.indexOf("```", at));
        String out = block.replace("/var/lib/gpusched", state.toString())
                .replaceAll("(?m)^(external-resource\\.gpu\\.param\\.inventory:\\s*)auto\\b", "$1simulated:dgx1-v100")
                .replaceAll("(?m)^(external-resource\\.gpu\\.amount:\\s*)\\d+", "$14");
        assertThat(out).as("the README block, adapted to this node")
                .contains("external-resource.gpu.param.inventory: simulated:dgx1-v100")
                .contains("external-resource.gpu.amount: 4").contains(state.toString());
        return out + "\n";
    }

    /** @return the cluster's addresses (loopback, free ports) and small memory sizes, as a user's file would add */
    private static String clusterLines() throws IOException {
        return String.join("\n",
                "env.java.opts.all: " + JAVA_OPTS,
                "jobmanager.rpc.address: 127.0.0.1",
                "jobmanager.bind-host: 127.0.0.1",
                "jobmanager.rpc.port: " + freePort(),
                "rest.address: 127.0.0.1",
                "rest.bind-address: 127.0.0.1",
                "rest.port: " + freePort(),
                "taskmanager.host: 127.0.0.1",
                "taskmanager.bind-host: 127.0.0.1",
                "taskmanager.numberOfTaskSlots: 2",
                // started with the JobManager, a TaskManager asks again soon (Flink's default pause is 10 s)
                "cluster.registration.error-delay: 200 ms",
                "parallelism.default: 1",
                "taskmanager.memory.process.size: 512m",
                "taskmanager.memory.jvm-metaspace.size: 128m",
                "taskmanager.memory.jvm-overhead.min: 64m",
                "taskmanager.memory.jvm-overhead.max: 64m",
                "taskmanager.memory.framework.off-heap.size: 32m",
                "taskmanager.memory.network.min: 16m",
                "taskmanager.memory.network.max: 16m",
                "taskmanager.memory.managed.size: 16m",
                "jobmanager.memory.process.size: 512m",
                "jobmanager.memory.jvm-metaspace.size: 128m",
                "jobmanager.memory.jvm-overhead.min: 64m",
                "jobmanager.memory.jvm-overhead.max: 64m",
                "") + "\n";
    }

    /** @return whether a class path entry is part of what Flink brings (not gpusched, not the test tools) */
    private static boolean isFlinkDistribution(String entry) {
        // by what each entry is (ClassPathEntry), never by words in its path: a local repository inside the checkout
        // or under a directory named junit or gpusched changes nothing (issue 32)
        ClassPathEntry e = ClassPathEntry.of(entry);
        if (!e.isJar() || e.isGpusched()) {
            return false; // this build's own jars and classes
        }
        // slf4j-api and slf4j-simple stay: Flink's logging (the distribution ships a log4j binding)
        return !e.isTestTool() && !e.isArtifact("jna", "jna-platform", "snakeyaml")
                && !e.carries("com/fasterxml/jackson/");
    }

    /**
     * @param command {@code GET_JM_RESOURCE_PARAMS} or {@code GET_TM_RESOURCE_PARAMS}
     * @param p       BashJavaUtils started with it ({@link #resourceParamsProcess})
     * @return the JVM options and the dynamic properties Flink's {@code BashJavaUtils} computes from the
     *         configuration, as {@code jobmanager.sh}/{@code taskmanager.sh} use them (split on blanks, as the
     *         scripts' word splitting does)
     */
    private List<List<String>> resourceParams(String command, Process p) throws IOException, InterruptedException {
        String name = "bash-java-utils-" + command;
        assertThat(p.waitFor(WAIT_S, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as("BashJavaUtils %s; log: %s", command, log(name)).isZero();
        List<List<String>> out = new ArrayList<>();
        for (String line : Files.readAllLines(logs.resolve(name + ".out"))) {
            if (line.startsWith("BASH_JAVA_UTILS_EXEC_RESULT:")) {
                String v = line.substring("BASH_JAVA_UTILS_EXEC_RESULT:".length()).trim();
                out.add(v.isEmpty() ? List.of() : List.of(v.split("\\s+")));
            }
        }
        assertThat(out).as("BashJavaUtils %s output", command).hasSize(2);
        return out;
    }

    /** @return BashJavaUtils started with {@code command}, as the scripts run it (read by {@link #resourceParams}) */
    private Process resourceParamsProcess(String command) throws IOException {
        return start("bash-java-utils-" + command, "org.apache.flink.runtime.util.bash.BashJavaUtils",
                List.of(List.of(), List.of()), command, "--configDir", conf.toString());
    }

    private Process taskManager(String name, List<List<String>> params) throws IOException {
        return start(name, "org.apache.flink.runtime.taskexecutor.TaskManagerRunner", params, "--configDir",
                conf.toString());
    }

    /**
     * @param params the JVM options (first) and the dynamic properties (second, after the arguments) of
     *               {@link #resourceParams}
     */
    private Process start(String name, String mainClass, List<List<String>> params, String... args)
            throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of(JAVA_OPTS.split(" ")));
        cmd.addAll(FAST_START);
        cmd.addAll(params.get(0).isEmpty() ? List.of("-Xmx256m") : params.get(0));
        cmd.addAll(List.of("-cp", flinkHome.resolve("lib") + "/*", mainClass));
        cmd.addAll(List.of(args));
        cmd.addAll(params.get(1));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(logs.resolve(name + ".log").toFile())
                .redirectOutput(logs.resolve(name + ".out").toFile());
        pb.environment().put("FLINK_HOME", flinkHome.toString());
        pb.environment().put("FLINK_CONF_DIR", conf.toString());
        pb.environment().put("FLINK_LIB_DIR", flinkHome.resolve("lib").toString());
        pb.environment().put("FLINK_PLUGINS_DIR", flinkHome.resolve("plugins").toString());
        pb.environment().remove("GPUSCHED_STATE_DIR");
        Process p = pb.start();
        children.add(p);
        names.put(p, name);
        return p;
    }

    /** @return a jar of the job's classes, as a user submits it */
    private Path jobJar() throws IOException {
        Path jar = tmp.resolve("gpu-job.jar");
        Path classes = Path.of("target", "test-classes").toAbsolutePath();
        String pkg = StandaloneGpuJob.class.getPackageName().replace('.', '/');
        try (var out = new java.util.jar.JarOutputStream(Files.newOutputStream(jar)); var files =
                Files.list(classes.resolve(pkg))) {
            for (Path f : (Iterable<Path>) files::iterator) {
                if (f.getFileName().toString().startsWith(StandaloneGpuJob.class.getSimpleName())) {
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
                throw new AssertionError(what + ": the process exited " + p.exitValue() + "; log: "
                        + log(names.get(p)));
            }
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting until " + what + "; log: " + log(names.get(p)));
            }
            Thread.sleep(200);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
