package io.gpusched.yarn.adversarial.sharedledger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.testing.LedgerReader;
import io.gpusched.yarn.SharedLedgerEngineChild;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Engines beside the node service (issue 33): the YARN plug-in, from its drop-in jar, runs as a real service user of
 * its own (made with {@code useradd}, a member of a state group made with {@code groupadd}) beside a root process (the
 * service's stand-in: a scheduler in this JVM, as {@code gpusched serve} and the root command are) on one state
 * directory, {@code root:<group> 2770}, both told the group ({@code GPUSCHED_STATE_GROUP}, {@code gpu.state_group}).
 * Both grant and release concurrently; the ledger file, walked record by record by this test's own parser and read by
 * gpusched-testing's {@link LedgerReader}, never grants a GPU a live record holds. A user outside the group can neither
 * write nor read the ledger; a hostile member cannot hard-link a root file into the directory (the kernel refuses), and
 * the links and FIFOs it plants in place of the ledger's side files are refused by root without touching their targets
 * or hanging. Users, group and files are removed afterwards.
 */
@Tag("adversarial")
class EngineUserBesideRootIT {
    static String suffix;
    static String group;
    static String member;
    static String outsider;
    static Path base;
    static Path state;
    static String classPath;

    @BeforeAll
    static void usersAndJars() throws Exception {
        assumeTrue(Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid")),
                "needs root: makes users and a group, runs the engine as its own user");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")) || Files.isExecutable(Path.of("/bin/setpriv")),
                "needs setpriv (util-linux)");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        suffix = HexFormat.of().formatHex(r);
        group = "gse-" + suffix;
        member = "gsy-" + suffix;
        outsider = "gso-" + suffix;
        assumeTrue(run("groupadd", group).exit == 0, "groupadd works here");
        assertThat(run("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", "-G", group, member).exit).isZero();
        assertThat(run("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", outsider).exit).isZero();

        // a directory the engine's user can reach: the drop-in jar, the Hadoop jars a NodeManager has, this child
        base = Files.createTempDirectory(Path.of("/tmp"), "gsengines-");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path jars = Files.createDirectory(base.resolve("jars"));
        List<String> cp = new ArrayList<>();
        try (Stream<Path> s = Files.list(Path.of("target"))) {
            Path dropIn = s.filter(p -> p.getFileName().toString().matches("gpusched-yarn-.*\\.jar")).findFirst()
                    .orElseThrow(() -> new AssertionError("target/gpusched-yarn-<version>.jar is missing: run with"
                            + " failsafe (mvn verify)"));
            cp.add(copy(dropIn, jars).toString());
        }
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = Path.of(e).getFileName().toString();
            if (name.endsWith(".jar")
                    && name.matches("(hadoop-(common|annotations|auth|shaded-guava|shaded-protobuf.*|yarn-api"
                            + "|yarn-common|yarn-server-common|yarn-server-nodemanager)|commons-|woodstox|stax2"
                            + "|slf4j-|guava|failureaccess|jna|re2j).*")) {
                cp.add(copy(Path.of(e), jars).toString());
            }
        }
        Path classes = base.resolve("classes");
        String rel = SharedLedgerEngineChild.class.getName().replace('.', '/') + ".class";
        Path from = Path.of("target", "test-classes", rel);
        Files.createDirectories(classes.resolve(rel).getParent());
        Files.copy(from, classes.resolve(rel));
        try (Stream<Path> w = Files.walk(classes)) {
            for (Path p : w.toList()) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(Files.isDirectory(p) ? "rwxr-xr-x"
                        : "rw-r--r--"));
            }
        }
        cp.add(classes.toString());
        classPath = String.join(File.pathSeparator, cp);

        // the node's state directory as an admin makes it for the engines
        state = Files.createDirectory(base.resolve("state"));
        assertThat(run("chgrp", group, state.toString()).exit).isZero();
        assertThat(run("chmod", "2770", state.toString()).exit).isZero();
    }

    @AfterAll
    static void cleanUp() throws Exception {
        if (suffix == null) {
            return;
        }
        run("userdel", member);
        run("userdel", outsider);
        run("groupdel", group);
        if (base != null) {
            try (Stream<Path> s = Files.walk(base)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    record Run(int exit, String out) {
    }

    private static Run run(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        return new Run(p.waitFor(120, TimeUnit.SECONDS) ? p.exitValue() : -1, out);
    }

    private static Path copy(Path jar, Path dir) throws Exception {
        Path to = dir.resolve(jar.getFileName());
        Files.copy(jar, to, StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(to, PosixFilePermissions.fromString("rw-r--r--"));
        return to;
    }

    /** @return a process running {@code cmd} as {@code user} (its groups from the group database), in {@code base} */
    private static ProcessBuilder as(String user, String... cmd) throws Exception {
        String gid = run("id", "-g", user).out.strip();
        List<String> all = new ArrayList<>(List.of("setpriv", "--reuid=" + user, "--regid=" + gid, "--init-groups"));
        all.addAll(List.of(cmd));
        ProcessBuilder pb = new ProcessBuilder(all).directory(base.toFile()).redirectErrorStream(true);
        pb.environment().put("GPUSCHED_STATE_GROUP", group);
        pb.environment().put("HOME", base.toString());
        return pb;
    }

    private static ProcessBuilder engine(String user, long seed, int grants) throws Exception {
        return as(user, Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classPath,
                SharedLedgerEngineChild.class.getName(), state.toString(), Long.toString(seed),
                Integer.toString(grants));
    }

    private static GpuScheduler rootScheduler(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).stateDir(state).config(GpuConfig.builder().stateGroup(group)
                .build()).maintenanceInterval(Duration.ZERO).auditLogging(false).build();
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theEngineAsItsOwnUserAndRootShareOneLedgerAndNoGpuIsGrantedTwice() throws Exception {
        Process engine = engine(member, 33, 150).start();
        int rootGrants = 0;
        Random rnd = new Random(33);
        StringBuilder out = new StringBuilder();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler root = rootScheduler(inv)) {
            List<Allocation> mine = new ArrayList<>();
            while (engine.isAlive() || rootGrants < 20) {
                try {
                    mine.add(root.allocate(GpuRequest.builder().count(1 + rnd.nextInt(2)).owner("root").build()));
                    rootGrants++;
                } catch (GpuAllocationException e) {
                    // the engine holds what is left
                }
                if (!mine.isEmpty() && rnd.nextBoolean()) {
                    root.release(mine.remove(rnd.nextInt(mine.size())).id());
                }
                Thread.sleep(rnd.nextInt(5));
                if (rootGrants > 100_000) {
                    break;
                }
            }
            for (Allocation a : mine) {
                root.release(a.id());
            }
        } finally {
            out.append(new String(engine.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
            assertThat(engine.waitFor(120, TimeUnit.SECONDS)).isTrue();
        }
        assertThat(engine.exitValue()).as("the engine as " + member + ":\n" + out).isZero();
        assertThat(out.toString()).contains("DONE");
        long acks = out.toString().lines().filter(l -> l.startsWith("ACK ")).count();
        assertThat(acks).isEqualTo(150);
        assertThat(rootGrants).isGreaterThanOrEqualTo(20);

        int records = walk(state.resolve("ledger"));
        assertThat(records).as("records walked").isGreaterThan(150 + 20);
        LedgerReader end = LedgerReader.read(state);
        List<String> live = new ArrayList<>();
        end.live.values().forEach(l -> live.addAll(l.uuids()));
        assertThat(live).as("live at the end").doesNotHaveDuplicates();
        Map<String, Integer> releases = new HashMap<>();
        end.ended.forEach(e -> releases.merge(e.id(), 1, Integer::sum));
        assertThat(releases.values()).as("releases per record").allMatch(c -> c == 1);

        for (String f : List.of("ledger", "ledger.lock", "node")) {
            PosixFileAttributes a = Files.readAttributes(state.resolve(f), PosixFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS);
            assertThat(a.group().getName()).as(f + "'s group").isEqualTo(group);
            assertThat(PosixFilePermissions.toString(a.permissions())).as(f + "'s mode").isEqualTo("rw-rw----");
        }
        assertThat((Integer) Files.getAttribute(state, "unix:mode") & 07777).isEqualTo(02770);

        // outside the group: neither the engine's writes nor a read of the ledger
        long size = Files.size(state.resolve("ledger"));
        Run denied = run(engine(outsider, 1, 1));
        assertThat(denied.exit).as(denied.out).isNotZero();
        assertThat(denied.out).contains(state.toString());
        assertThat(Files.size(state.resolve("ledger"))).isEqualTo(size);
        Run read = run("setpriv", "--reuid=" + outsider, "--regid=" + run("id", "-g", outsider).out.strip(),
                "--init-groups", "cat", state.resolve("ledger").toString());
        assertThat(read.exit).as("an outsider reads the ledger: " + read.out).isNotZero();

        // README: a container's user (outside the group) reads its GPUs once the directory is 2775 and its files
        // 0664, with the state group in the container's environment (yarn.nodemanager.admin-env)
        List<String> acked = new ArrayList<>();
        out.toString().lines().filter(l -> l.startsWith("ACK ")).forEach(l -> acked.add(l.split(" ")[1]));
        out.toString().lines().filter(l -> l.startsWith("FIN ")).forEach(l -> acked.remove(l.split(" ")[1]));
        assertThat(acked).as("containers the engine left running").isNotEmpty();
        assertThat(run("chmod", "2775", state.toString()).exit).isZero();
        assertThat(run("chmod", "0664", state.resolve("ledger").toString(), state.resolve("node").toString()).exit)
                .isZero();
        Run env = run(as(outsider, Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                classPath, "io.gpusched.yarn.YarnContainerGpus", "--inventory", "simulated:dgx1-v100",
                "--state-dir", state.toString(), acked.get(0)));
        assertThat(env.exit).as(env.out).isZero();
        assertThat(env.out).contains("export CUDA_VISIBLE_DEVICES='GPU-");
        assertThat(run("chmod", "2770", state.toString()).exit).isZero();
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void aHostileMemberCannotMakeRootWriteThroughALinkNorHangIt() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler root = rootScheduler(inv)) {
            try {
                root.allocate(GpuRequest.builder().count(1).owner("root").build());
            } catch (GpuAllocationException full) {
                // the other test's engine may have left containers holding every GPU: root, as the node's admin,
                // frees one, so that the attacks below meet a node with a free GPU whichever order the tests run in
                assertThat(root.release(root.allocations().get(0).id())).isTrue();
            }
            assertThat(root.allocations()).as("a node with a holder").isNotEmpty();
        }
        Path victim = base.resolve("victim");
        Files.writeString(victim, "root's own\n");
        Files.setPosixFilePermissions(victim, PosixFilePermissions.fromString("rw-------"));
        Path sh = Path.of("/bin/sh");

        // the kernel keeps a member from hard-linking root's file into the directory (fs.protected_hardlinks)
        Run hard = run(as(member, sh.toString(), "-c", "ln " + victim + " " + state.resolve("x")));
        assertThat(hard.exit).as("a member hard-links root's file: " + hard.out).isNotZero();
        assertThat(Files.exists(state.resolve("x"), LinkOption.NOFOLLOW_LINKS)).isFalse();

        for (String side : List.of("ledger.lock", "ledger", "node")) {
            Path f = state.resolve(side);
            Files.copy(f, base.resolve(side + ".saved"), StandardCopyOption.COPY_ATTRIBUTES,
                    StandardCopyOption.REPLACE_EXISTING);
            Run plant = run(as(member, sh.toString(), "-c", "rm -f " + f + " && ln -s " + victim + " " + f));
            assertThat(plant.exit).as("the member replaces " + side + " with a link: " + plant.out).isZero();
            assertThatThrownBy(() -> {
                try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler root = rootScheduler(
                        inv)) {
                    root.allocate(GpuRequest.builder().count(1).build());
                }
            }).as(side + " as a link").isInstanceOfSatisfying(LedgerException.class,
                    e -> assertThat(e.getMessage()).contains(f.toString()));
            assertThat(Files.readString(victim)).as("the link's target after root met " + side)
                    .isEqualTo("root's own\n");
            Run fifo = run(as(member, sh.toString(), "-c", "rm -f " + f + " && mkfifo " + f));
            assertThat(fifo.exit).as(fifo.out).isZero();
            assertThatThrownBy(() -> {
                try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler root = rootScheduler(
                        inv)) {
                    root.allocate(GpuRequest.builder().count(1).build());
                }
            }).as(side + " as a FIFO").isInstanceOf(LedgerException.class);
            Files.delete(f);
            Files.move(base.resolve(side + ".saved"), f);
        }
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler root = rootScheduler(inv)) {
            assertThat(root.allocations()).as("the node after the attacks").isNotEmpty();
        }
    }

    private static Run run(ProcessBuilder pb) throws Exception {
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        return new Run(p.waitFor(120, TimeUnit.SECONDS) ? p.exitValue() : -1, out);
    }

    /**
     * Walks the ledger file by its documented format: no allocation record takes a GPU a live record holds.
     *
     * @return the records walked
     */
    private static int walk(Path ledger) throws Exception {
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(ledger, StandardCharsets.UTF_8);
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        Map<String, String> holderOfUuid = new HashMap<>();
        Map<String, List<String>> uuidsOfId = new HashMap<>();
        for (int i = 1; i < lines.size(); i++) {
            String line = lines.get(i);
            JsonNode n = json.readTree(line.substring(line.indexOf(' ', line.indexOf(' ') + 1) + 1));
            switch (n.path("op").asText()) {
                case "A" -> {
                    String id = n.get("id").asText();
                    List<String> uuids = new ArrayList<>();
                    for (JsonNode u : n.get("devices")) {
                        assertThat(holderOfUuid).as("record %d: %s takes GPU %s", i, id, u.asText())
                                .doesNotContainKey(u.asText());
                        holderOfUuid.put(u.asText(), id);
                        uuids.add(u.asText());
                    }
                    uuidsOfId.put(id, uuids);
                }
                case "R" -> uuidsOfId.getOrDefault(n.get("id").asText(), List.of()).forEach(holderOfUuid::remove);
                case "S" -> throw new IllegalStateException("a compaction in a short test ledger");
                default -> {}
            }
        }
        return lines.size() - 1;
    }
}
