package io.gpusched.cli.everymember;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.testing.ClassPathEntry;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 24's test: every kind of process that schedules a node's GPUs, each as users deploy it and all on the
 * defaults (only {@code $GPUSCHED_STATE_DIR} set, no state directory given to anyone), on one simulated DGX-1:
 * the {@code gpusched} command ({@code allocate}, {@code release}, {@code status}), a process embedding the library
 * ({@link LibraryMember}), the console ({@code gpusched serve}), Spark Workers and Flink TaskManagers
 * ({@link EngineMember}: the engine's own class path from its module's build, the drop-in jar alone, the engine's
 * discovery path). Each is a JVM of its own.
 *
 * <p>This test sequences every step itself (one at a time, each awaited), so its list of acknowledged grants and
 * releases is the real order. An independent checker replays that history: no GPU is granted while another holding
 * has it, and a refusal happens only when the request does not fit in the GPUs nobody holds. At checkpoints the
 * live holdings of the history must be exactly what {@code gpusched status --json} lists, what the console's
 * {@code /api/v1/allocations} lists, and what the ledger file holds, read here by its documented format at the
 * documented place ({@code $GPUSCHED_STATE_DIR/simulated/dgx1-v100/ledger}); holders' pids included (status
 * names none).
 *
 * <p>The steps: the node filled by all five kinds, each kind then refused; a Worker stopped, a TaskManager killed,
 * the command's release, the engines refilling; the command releasing the library's allocation; ten seeded random
 * steps ({@code -Dgpusched.everymember.seed=N} repeats a run; the seed is printed and named in a failure); everyone
 * giving back, the whole node granted once more, and nothing left.
 */
class OneNodeEveryMemberIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_S = 120;
    private static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();

    @TempDir
    Path tmp;
    private Path base;
    private Path logs;
    private Path memberClasses;
    private final List<Member> members = new ArrayList<>();
    private final History history = new History();
    private final Map<Integer, String> uuidByIndex = new HashMap<>();
    private final Map<String, Giver> givers = new LinkedHashMap<>();

    @AfterEach
    void stopAll() throws InterruptedException {
        for (Member m : members) {
            m.process.descendants().forEach(ProcessHandle::destroyForcibly);
            m.process.destroyForcibly();
        }
        for (Member m : members) {
            m.process.waitFor(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void cliLibraryConsoleSparkAndFlinkShareOneLedgerOnTheDefaults() throws Exception {
        Path sparkJar = property("gpusched.sparkDropInJar");
        Path flinkJar = property("gpusched.flinkDropInJar");
        List<String> sparkPath = enginePath(property("gpusched.sparkClassPath"), e -> e.isArtifact("slf4j-simple"));
        List<String> flinkPath = enginePath(property("gpusched.flinkClassPath"),
                e -> e.carries("com/fasterxml/jackson/"));
        setUp();
        Path pluginsDir = Files.createDirectories(tmp.resolve("flink-plugins").resolve("gpusched")).getParent();
        Files.createSymbolicLink(pluginsDir.resolve("gpusched").resolve(flinkJar.getFileName()), flinkJar);
        List<String> sparkCp = new ArrayList<>(sparkPath);
        sparkCp.addAll(List.of(sparkJar.toString(), memberClasses.toString()));
        List<String> flinkCp = new ArrayList<>(flinkPath);
        flinkCp.addAll(List.of(memberClasses.toString()));

        // the console first: it must follow what every other process does
        Member console = start("console", cliClassPath(), Map.of(), GpuschedCommand.class.getName(), "--simulate",
                "dgx1-v100", "serve", "--listen", "127.0.0.1:0", "--interval", "200ms");
        String consoleLine = console.awaitLine("gpusched console on ");
        URI allocations = URI.create(consoleLine.split(" ")[3].replaceAll("/$", "") + "/api/v1/allocations");

        Member lib = start("library", cliClassPath(), Map.of(), LibraryMember.class.getName());
        assertThat(lib.awaitLine("MEMBER READY ")).as("the library's default state directory")
                .endsWith(base.resolve("simulated").resolve("dgx1-v100").toString());
        Engine spark = new Engine("spark", sparkCp, Map.of(), List.of(
                "spark.resources.discoveryPlugin=io.gpusched.spark.GpuschedDiscoveryPlugin",
                "spark.gpusched.inventory=simulated:dgx1-v100"));
        Engine flink = new Engine("flink", flinkCp, Map.of("FLINK_PLUGINS_DIR", pluginsDir.toString()), List.of(
                "external-resources=gpu",
                "external-resource.gpu.driver-factory.class=io.gpusched.flink.GpuschedDriverFactory",
                "external-resource.gpu.param.inventory=simulated:dgx1-v100"));

        // fill the node with every member holding something
        String lib1 = libAlloc(lib, 2);
        Member sparkA = spark.start("spark-worker-a", 2);
        String cli1 = cliAlloc(1);
        Member flinkA = flink.start("flink-tm-a", 2);
        cliAlloc(1);
        assertThat(history.held()).as("five holdings from five kinds of process").hasSize(5);
        assertThat(history.busy()).isEqualTo(8);
        // now every kind is refused, and says so
        assertThat(spark.start("spark-worker-b", 1).refusal).contains("INSUFFICIENT_GPUS");
        assertThat(flink.start("flink-tm-b", 1).refusal).isNotNull();
        assertThat(libAlloc(lib, 1)).isNull();
        assertThat(cliAlloc(1)).isNull();
        checkpoint(allocations, "every member holding");

        // a clean stop, a SIGKILL, a release by the command, then the freed GPUs go to the engines again
        spark.stop(sparkA);
        flink.kill(flinkA);
        cliRelease(cli1);
        flink.start("flink-tm-c", 4);
        spark.start("spark-worker-c", 1);
        assertThat(history.busy()).as("the node full again").isEqualTo(8);
        checkpoint(allocations, "after a stop, a kill and a release, refilled");

        // the command releases the library's allocation (one ledger)
        cliRelease(lib1);

        // a seeded random stretch: any kind of member asks, gives back, or (an engine) is killed
        long seed = Long.getLong("gpusched.everymember.seed", System.nanoTime());
        System.out.println("random stretch: -Dgpusched.everymember.seed=" + seed + " repeats it");
        history.seed = seed;
        Random rnd = new Random(seed);
        for (int step = 0; step < 10; step++) {
            if (!givers.isEmpty() && rnd.nextInt(5) < 2) {
                List<Giver> live = new ArrayList<>(givers.values());
                Giver g = live.get(rnd.nextInt(live.size()));
                (g.kill() != null && rnd.nextInt(3) == 0 ? g.kill() : g.stop()).run();
            } else {
                int n = 1 + rnd.nextInt(3);
                switch (rnd.nextInt(4)) {
                    case 0 -> libAlloc(lib, n);
                    case 1 -> cliAlloc(n);
                    case 2 -> spark.start("spark-worker-r" + step, n);
                    default -> flink.start("flink-tm-r" + step, n);
                }
            }
        }

        // everyone gives back; then the whole node can be had again (a killed holder's GPUs reclaimed)
        for (Giver g : new ArrayList<>(givers.values())) {
            g.stop().run();
        }
        String whole = cliAlloc(8);
        assertThat(whole).as("nothing leaked: the whole node is free").isNotNull();
        cliRelease(whole);
        checkpoint(allocations, "all given back");
        assertThat(history.held()).isEmpty();
        lib.send("EXIT");
        assertThat(lib.process.waitFor(WAIT_S, TimeUnit.SECONDS)).isTrue();

        // the independent replay of everything acknowledged
        history.events.forEach(e -> System.out.println("history: " + e));
        history.check();
        assertThat(history.events).as("the history covers every kind of member")
                .extracting(e -> e.member().replaceAll("[-:].*", ""))
                .contains("library", "cli", "spark", "flink");
    }

    // ---------------------------------------------------------------------------------------------- members

    /** An action that ends a holding. */
    @FunctionalInterface
    private interface Step {
        void run() throws Exception;
    }

    /** How a live holding is given back: {@code stop}, and for an engine member also {@code kill} (else null). */
    private record Giver(Step stop, Step kill) {
    }

    private String libAlloc(Member lib, int n) throws Exception {
        lib.send("ALLOC " + n);
        String line = lib.awaitLine("MEMBER ");
        if (line.startsWith("MEMBER GRANTED ")) {
            String[] f = line.split(" ");
            history.grant("library", f[2], lib.process.pid(), indices(f[3]));
            givers.put(f[2], new Giver(() -> libRelease(lib, f[2]), null));
            return f[2];
        }
        assertThat(line).as("the library's answer").startsWith("MEMBER REFUSED INSUFFICIENT_GPUS");
        history.refuse("library", n);
        return null;
    }

    private void libRelease(Member lib, String id) throws Exception {
        lib.send("RELEASE " + id);
        assertThat(lib.awaitLine("MEMBER ")).isEqualTo("MEMBER RELEASED " + id + " true");
        history.release("library", id);
        givers.remove(id);
    }

    private String cliAlloc(int n) throws Exception {
        Cli c = cli("--json", "allocate", "--gpu=" + n);
        if (c.exit == 0) {
            JsonNode j = JSON.readTree(c.out.substring(c.out.indexOf('{')));
            Set<Integer> got = new TreeSet<>();
            j.get("devices").forEach(d -> got.add(d.asInt()));
            String id = j.get("id").asText();
            history.grant("cli", id, -1, got);
            givers.put(id, new Giver(() -> cliRelease(id), null));
            return id;
        }
        assertThat(c.out).as("gpusched allocate refused").contains("INSUFFICIENT_GPUS");
        history.refuse("cli", n);
        return null;
    }

    private void cliRelease(String id) throws Exception {
        Cli c = cli("release", id);
        assertThat(c.exit).as("gpusched release " + id + ": " + c.out).isZero();
        history.release("cli", id);
        givers.remove(id);
    }

    private record Cli(int exit, String out) {
    }

    private Cli cli(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(GpuschedCommand.class.getName(), "--simulate", "dgx1-v100"));
        cmd.addAll(List.of(args));
        Member m = start("cli-" + members.size(), cliClassPath(), Map.of(), cmd.toArray(String[]::new));
        m.process.getOutputStream().close();
        assertThat(m.process.waitFor(WAIT_S, TimeUnit.SECONDS)).as("gpusched " + String.join(" ", args)).isTrue();
        m.reader.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        return new Cli(m.process.exitValue(), String.join("\n", m.lines));
    }

    /** Starts Spark Workers or Flink TaskManagers (their GPU discovery) with one engine's class path. */
    private final class Engine {
        private final String name;
        private final List<String> classPath;
        private final Map<String, String> env;
        private final List<String> conf;

        Engine(String name, List<String> classPath, Map<String, String> env, List<String> conf) {
            this.name = name;
            this.classPath = classPath;
            this.env = env;
            this.conf = conf;
        }

        Member start(String label, int amount) throws Exception {
            List<String> args = new ArrayList<>(List.of(EngineMember.class.getName(), name, String.valueOf(amount)));
            args.addAll(conf);
            Member m = OneNodeEveryMemberIT.this.start(label, String.join(File.pathSeparator, classPath), env,
                    args.toArray(String[]::new));
            String line = m.awaitLine("MEMBER ");
            if (line.startsWith("MEMBER GRANTED ")) {
                Set<Integer> got = indices(line.split(" ")[2]);
                assertThat(got).as(label + " got what it asked for").hasSize(amount);
                history.grant(label, key(m), m.process.pid(), got);
                givers.put(key(m), new Giver(() -> stop(m), () -> kill(m)));
            } else {
                m.refusal = line;
                history.refuse(label, amount);
                stop(m);
            }
            return m;
        }

        /** A clean stop: the member exits normally (its GPUs go back as it exits). */
        void stop(Member m) throws Exception {
            if (m.process.isAlive()) { // a member refused by an exception has exited already
                try {
                    m.send("EXIT");
                } catch (IOException exited) {
                    // it exited between the check and the write (a refused member exits by itself): the pipe is
                    // closed; that it stopped is checked below (a CI-shaped run met this race: "Broken pipe")
                }
            }
            assertThat(m.process.waitFor(WAIT_S, TimeUnit.SECONDS)).as(m.name + " stops").isTrue();
            if (m.refusal == null) {
                history.release(m.name, key(m));
                givers.remove(key(m));
            }
        }

        /** SIGKILL: nothing of the member runs; its GPUs are free once it is dead (reclaimed by the next asker). */
        void kill(Member m) throws Exception {
            m.process.destroyForcibly();
            assertThat(m.process.waitFor(WAIT_S, TimeUnit.SECONDS)).isTrue();
            history.release(m.name + ":killed", key(m));
            givers.remove(key(m));
        }

        private String key(Member m) {
            return name + "-pid-" + m.process.pid();
        }
    }

    /** A child JVM; its standard output's lines are kept, its standard error goes to a log file. */
    private static final class Member {
        final String name;
        final Process process;
        final List<String> lines = new ArrayList<>();
        final BlockingQueue<String> pending = new LinkedBlockingQueue<>();
        final Thread reader;
        final Path log;
        String refusal;

        Member(String name, Process process, Path log) {
            this.name = name;
            this.process = process;
            this.log = log;
            this.reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    for (String l = r.readLine(); l != null; l = r.readLine()) {
                        synchronized (lines) {
                            lines.add(l);
                        }
                        pending.add(l);
                    }
                } catch (IOException e) {
                    pending.add("READ FAILED " + e);
                }
            }, "read-" + name);
            reader.setDaemon(true);
            reader.start();
        }

        String awaitLine(String prefix) throws Exception {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (System.nanoTime() < end) {
                String l = pending.poll(1, TimeUnit.SECONDS);
                if (l != null && l.startsWith(prefix)) {
                    return l;
                }
                if (l == null && !process.isAlive() && pending.isEmpty() && !reader.isAlive()) {
                    break;
                }
            }
            throw new AssertionError(name + " never said \"" + prefix + "\"; stdout " + lines + "; stderr "
                    + tail(log));
        }

        void send(String line) throws IOException {
            Writer w = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            w.write(line + "\n");
            w.flush();
        }
    }

    private Member start(String name, String classPath, Map<String, String> env, String... mainAndArgs)
            throws IOException {
        // less start-up work for the ~25 short JVMs this test runs one after another (the C1 compiler alone, one GC
        // thread: about a tenth off a CLI run on a 2-core machine); nothing any member does depends on them
        List<String> cmd = new ArrayList<>(List.of(JAVA, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-Xshare:auto", "-Xmx384m", "-cp", classPath));
        cmd.addAll(Arrays.asList(mainAndArgs));
        Path log = logs.resolve(name + ".log");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(log.toFile());
        pb.environment().put("GPUSCHED_STATE_DIR", base.toString()); // the one setting every member shares
        pb.environment().remove("XDG_STATE_HOME");
        pb.environment().putAll(env);
        Member m = new Member(name, pb.start(), log);
        members.add(m);
        return m;
    }

    // ---------------------------------------------------------------------------------------------- checkpoints

    /** The history's live holdings are what status, the console and the ledger file hold (the last two with pids). */
    private void checkpoint(URI allocations, String when) throws Exception {
        Map<Set<Integer>, Long> expected = new HashMap<>();
        history.held().values().forEach(h -> expected.put(h.gpus(), h.pid()));

        Cli status = cli("--json", "status");
        assertThat(status.exit).as(status.out).isZero();
        JsonNode st = JSON.readTree(status.out.substring(status.out.indexOf('{')));
        assertThat(holdings(st.get("allocations")).keySet()).as("gpusched status (it names no holder pid), " + when
                + ": " + status.out).isEqualTo(expected.keySet());

        HttpClient http = HttpClient.newHttpClient();
        Map<Set<Integer>, Long> seen = null;
        String body = "";
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); // the console catches up on its next tick
        while (System.nanoTime() < end) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(allocations).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
            body = r.body();
            seen = holdings(JSON.readTree(body));
            if (seen.equals(expected)) {
                break;
            }
            Thread.sleep(100);
        }
        assertThat(seen).as("the console, " + when + ": " + body).isEqualTo(expected);

        assertThat(ledgerHoldings()).as("the ledger file, " + when).isEqualTo(expected);
    }

    /**
     * @return device set -> holder pid (-1: none), from a status ({@code deviceIndices}) or console
     *         ({@code devices}, {@code holderPid}) allocations array
     */
    private static Map<Set<Integer>, Long> holdings(JsonNode allocations) {
        Map<Set<Integer>, Long> out = new HashMap<>();
        for (JsonNode a : allocations) {
            Set<Integer> gpus = new TreeSet<>();
            (a.has("devices") ? a.get("devices") : a.get("deviceIndices")).forEach(d -> gpus.add(d.asInt()));
            JsonNode pid = a.path("holderPid");
            assertThat(out.put(gpus, pid.isNumber() ? pid.asLong() : -1L)).as("listed twice: " + gpus).isNull();
        }
        return out;
    }

    /**
     * Reads the ledger file by its documented format (a header line, then {@code <seq> <crc> <json>} lines:
     * {@code A} allocated, {@code R} ended, {@code S} a snapshot of the live ones) without gpusched's reader.
     *
     * @return device set -> holder pid (-1: none) of the allocations live in it
     */
    private Map<Set<Integer>, Long> ledgerHoldings() throws Exception {
        Path file = base.resolve("simulated").resolve("dgx1-v100").resolve("ledger");
        assertThat(file).as("the documented default place of a simulated node's ledger").isRegularFile();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        Map<String, JsonNode> live = new LinkedHashMap<>();
        for (String line : lines.subList(1, lines.size())) {
            int a = line.indexOf(' ');
            int b = line.indexOf(' ', a + 1);
            if (a < 0 || b < 0) {
                continue;
            }
            JsonNode n = JSON.readTree(line.substring(b + 1));
            switch (n.path("op").asText()) {
                case "A" -> live.put(n.get("id").asText(), n);
                case "S" -> {
                    live.clear();
                    n.get("live").forEach(x -> live.put(x.get("id").asText(), x));
                }
                case "R" -> live.remove(n.get("id").asText());
                default -> {}
            }
        }
        Map<Integer, String> byIndex = uuidByIndex;
        Map<String, Integer> index = new HashMap<>();
        byIndex.forEach((i, u) -> index.put(u, i));
        Map<Set<Integer>, Long> out = new HashMap<>();
        for (JsonNode n : live.values()) {
            Set<Integer> gpus = new TreeSet<>();
            n.get("devices").forEach(d -> gpus.add(index.get(d.asText())));
            JsonNode h = n.path("request").path("holder");
            out.put(gpus, h.isArray() ? h.get(0).asLong() : -1L);
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------------- the checker

    /**
     * What each member acknowledged, in the order this test sequenced it, and an independent replay: a grant must
     * not share a GPU with any holding live at that point; a refusal must be of a request larger than the GPUs no
     * holding has; a release must end a live holding.
     */
    static final class History {
        record Holding(String member, long pid, Set<Integer> gpus) {
        }

        record Event(String member, String kind, String key, long pid, Set<Integer> gpus, int count) {
        }

        final List<Event> events = new ArrayList<>();
        long seed;
        private final Map<String, Holding> live = new LinkedHashMap<>();

        void grant(String member, String key, long pid, Set<Integer> gpus) {
            events.add(new Event(member, "GRANT", key, pid, Set.copyOf(gpus), gpus.size()));
            live.put(key, new Holding(member, pid, Set.copyOf(gpus)));
            check(); // fail at the step that broke it
        }

        void refuse(String member, int count) {
            events.add(new Event(member, "REFUSE", null, -1, Set.of(), count));
            check();
        }

        void release(String member, String key) {
            events.add(new Event(member, "RELEASE", key, -1, Set.of(), 0));
            live.remove(key);
            check();
        }

        Map<String, Holding> held() {
            return live;
        }

        int busy() {
            return live.values().stream().mapToInt(h -> h.gpus().size()).sum();
        }

        /** Replays every event from the start. */
        void check() {
            Map<String, Set<Integer>> held = new LinkedHashMap<>();
            for (int i = 0; i < events.size(); i++) {
                Event e = events.get(i);
                String at = "event " + i + " " + e + " in " + events + " (random stretch seed " + seed + ")";
                switch (e.kind()) {
                    case "GRANT" -> {
                        for (Map.Entry<String, Set<Integer>> h : held.entrySet()) {
                            assertThat(e.gpus()).as("GPUs granted while " + h.getKey() + " holds them: " + at)
                                    .doesNotContainAnyElementsOf(h.getValue());
                        }
                        assertThat(held.put(e.key(), e.gpus())).as("granted twice: " + at).isNull();
                    }
                    case "REFUSE" -> {
                        int busy = held.values().stream().mapToInt(Set::size).sum();
                        assertThat(busy + e.count()).as("refused though it fit: " + at).isGreaterThan(8);
                    }
                    case "RELEASE" -> assertThat(held.remove(e.key())).as("released what was not held: " + at)
                            .isNotNull();
                    default -> throw new AssertionError(at);
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------- set-up

    private void setUp() throws IOException {
        base = Files.createDirectories(tmp.resolve("state-base"));
        logs = Path.of("target", "it-logs", "one-node-every-member").toAbsolutePath(); // kept for a failure's reader
        if (Files.isDirectory(logs)) {
            try (var old = Files.list(logs)) {
                for (Path f : (Iterable<Path>) old::iterator) {
                    Files.delete(f);
                }
            }
        }
        Files.createDirectories(logs);
        // EngineMember alone, so the engines' JVMs see no gpusched class but the drop-in jar's
        memberClasses = Files.createDirectories(tmp.resolve("member-classes"));
        String pkg = EngineMember.class.getPackageName().replace('.', '/');
        Path from = Path.of(EngineMember.class.getProtectionDomain().getCodeSource().getLocation().getPath())
                .resolve(pkg);
        Path to = Files.createDirectories(memberClasses.resolve(pkg));
        try (var files = Files.list(from)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                if (f.getFileName().toString().startsWith(EngineMember.class.getSimpleName())) {
                    Files.copy(f, to.resolve(f.getFileName()));
                }
            }
        }
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            for (GpuDevice d : inv.devices()) {
                uuidByIndex.put(d.index(), d.uuid());
            }
        }
    }

    private static Path property(String name) {
        String v = System.getProperty(name);
        assumeTrue(v != null && Files.isRegularFile(Path.of(v)), name + " (" + v + ") is written by `package` of "
                + "gpu-spark and gpu-flink; run this test with failsafe (mvn verify)");
        return Path.of(v).toAbsolutePath().normalize();
    }

    /**
     * @return an engine module's test class path (written at package, gpusched's modules left out), less test tools,
     *         JNA, SnakeYAML and {@code alsoNot}: each entry known by its artifact or its packages, never by the words
     *         in its path (issue 32)
     */
    private static List<String> enginePath(Path file, Predicate<ClassPathEntry> alsoNot) throws IOException {
        List<String> out = new ArrayList<>();
        for (ClassPathEntry e : ClassPathEntry.parse(Files.readString(file).trim())) {
            if (!e.isTestTool() && !e.isArtifact("jna", "jna-platform", "snakeyaml") && !alsoNot.test(e)) {
                out.add(e.path().toString());
            }
        }
        return out;
    }

    private static String cliClassPath() {
        // surefire and failsafe start the test JVM through a manifest-only jar; the real class path is this property
        return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    }

    private static Set<Integer> indices(String csv) {
        Set<Integer> s = new TreeSet<>();
        for (String x : csv.split(",")) {
            s.add(Integer.valueOf(x.trim()));
        }
        return s;
    }

    private static String tail(Path log) {
        try {
            String l = Files.readString(log);
            return l.length() > 4000 ? l.substring(l.length() - 4000) : l;
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }
}
