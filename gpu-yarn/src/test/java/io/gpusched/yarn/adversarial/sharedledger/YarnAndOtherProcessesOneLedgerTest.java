package io.gpusched.yarn.adversarial.sharedledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.OwnThread;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One state directory shared by an engine plug-in (the YARN device plug-in, in this JVM, as the
 * NodeManager holds it) and other processes of the node (child JVMs). The container side is the drop-in's
 * documented entry point {@code io.gpusched.yarn.YarnContainerGpus} (what {@code gpusched env} does; the
 * {@code gpusched} command itself is not on this module's class path, and gpusched-cli's has no Hadoop); the other
 * process is {@link Other}, the library as a host opens it ({@code GpuNode}), listing the node's allocations and
 * allocating. The other process must see the plug-in's holdings and never be granted its GPUs; the container side
 * must answer exactly for the container the plug-in recorded, refusing unknown, odd and released ids with nothing on
 * stdout for {@code eval} to run.
 */
@Tag("adversarial")
class YarnAndOtherProcessesOneLedgerTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    record Result(int exit, String out, String err) {
    }

    private Path state() throws Exception {
        Path s = Files.createDirectories(tmp.resolve("state"));
        Files.setPosixFilePermissions(s, PosixFilePermissions.fromString("rwx------"));
        return s;
    }

    /** Runs {@code main} of {@code cls} in a child JVM on this test's class path. */
    private static Result child(Class<?> cls, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"), cls.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.PIPE);
        pb.environment().remove("CONTAINER_ID");
        Process p = pb.start();
        p.getOutputStream().close();
        java.util.concurrent.CompletableFuture<byte[]> err = OwnThread.supply(() -> {
            try {
                return p.getErrorStream().readAllBytes();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        byte[] out = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS),
                cls.getSimpleName() + " " + String.join(" ", args) + " did not end");
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8),
                new String(err.get(), StandardCharsets.UTF_8));
    }

    /** {@code YarnContainerGpus [--inventory simulated:dgx1-v100] --state-dir D ID}: the container's side. */
    private static Result env(Path state, String id) throws Exception {
        return child(io.gpusched.yarn.YarnContainerGpus.class, "--inventory", "simulated:dgx1-v100", "--state-dir",
                state.toString(), id);
    }

    /** Another process of the node using the library: {@code status} prints the allocations as JSON, {@code allocate N}. */
    public static final class Other {
        public static void main(String[] args) throws Exception {
            try (io.gpusched.core.host.GpuNode node = io.gpusched.core.host.GpuNode.builder()
                    .inventory("simulated:dgx1-v100").stateDir(Path.of(args[0])).build()) {
                io.gpusched.core.GpuScheduler s = node.scheduler();
                s.refresh();
                if (args[1].equals("allocate")) {
                    try {
                        System.out.println(s.allocate(io.gpusched.core.GpuRequest.builder()
                                .count(Integer.parseInt(args[2])).owner("other").build()).deviceIndices());
                    } catch (io.gpusched.core.GpuAllocationException e) {
                        System.err.println(e.reason() + ": " + e.getMessage());
                        System.exit(1);
                    }
                    return;
                }
                com.fasterxml.jackson.databind.node.ObjectNode root = JSON.createObjectNode();
                com.fasterxml.jackson.databind.node.ArrayNode all = root.putArray("allocations");
                for (io.gpusched.core.Allocation a : s.allocations()) {
                    com.fasterxml.jackson.databind.node.ObjectNode o = all.addObject();
                    o.put("id", a.id());
                    o.put("labels", a.request().labels().toString());
                    a.deviceIndices().forEach(o.putArray("deviceIndices")::add);
                }
                System.out.println(root);
            }
        }
    }

    private static Configuration conf(Path state) {
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        return c;
    }

    private static Map<String, String> env(String container) {
        Map<String, String> e = new HashMap<>();
        e.put("CONTAINER_ID", container);
        return e;
    }

    private static Set<Integer> indices(SimulatedGpuInventory inv, Set<Device> ds) {
        Set<Integer> out = new TreeSet<>();
        for (Device d : ds) {
            out.add(inv.devices().stream().filter(g -> g.minor().orElse(-1) == d.getMinorNumber()).findFirst()
                    .orElseThrow().index());
        }
        return out;
    }

    /** Every GPU index that {@code status --json} lists under an allocation's {@code deviceIndices}. */
    private static Set<Integer> heldIn(JsonNode status) {
        Set<Integer> out = new TreeSet<>();
        for (JsonNode a : status.path("allocations")) {
            for (JsonNode d : a.path("deviceIndices")) {
                out.add(d.asInt());
            }
        }
        return out;
    }

    @Test
    void anotherProcessSeesTheContainersGpusAndIsNeverGrantedThem() throws Exception {
        Path state = state();
        String container = "container_1700000000000_0001_01_000002";
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf(state));
            try {
                Set<Device> all = p.getDevices();
                Set<Integer> yarn = indices(inv, p.allocateDevices(all, 3, env(container)));
                assertEquals(3, yarn.size());

                Result status = child(Other.class, state.toString(), "status");
                assertEquals(0, status.exit(), status.out() + status.err());
                JsonNode st = JSON.readTree(status.out().substring(status.out().indexOf('{')));
                assertEquals(yarn, heldIn(st), "status lists the container's GPUs as held: " + status.out());
                assertTrue(status.out().contains(container),
                        "the other process sees the container id: " + status.out());

                Result env = env(state, container);
                assertEquals(0, env.exit(), env.out() + env.err());
                String cvd = env.out().lines().filter(l -> l.startsWith("export CUDA_VISIBLE_DEVICES=")).findFirst()
                        .orElseThrow(() -> new AssertionError("no CUDA_VISIBLE_DEVICES: " + env.out()));
                Set<String> uuids = yarn.stream().map(i -> inv.devices().get(i).uuid()).collect(Collectors.toSet());
                Set<String> shown = Set.of(cvd.substring(cvd.indexOf('=') + 1).replace("'", "").split(","));
                assertEquals(uuids, shown, env.out());

                Result tooMany = child(Other.class, state.toString(), "allocate", "6");
                assertNotEquals(0, tooMany.exit(), "6 GPUs asked, 5 free: " + tooMany.out());
                assertTrue(tooMany.err().contains("INSUFFICIENT_GPUS"), tooMany.err());

                Result five = child(Other.class, state.toString(), "allocate", "5");
                assertEquals(0, five.exit(), five.out() + five.err());
                Result after = child(Other.class, state.toString(), "status");
                Set<Integer> held = heldIn(JSON.readTree(after.out().substring(after.out().indexOf('{'))));
                assertEquals(Set.of(0, 1, 2, 3, 4, 5, 6, 7), held, "8 held in all, none twice: " + after.out());
            } finally {
                p.close();
            }
        }
    }

    /**
     * The container side is meant for {@code eval "$(...)"}: an unknown id, an id with shell or line
     * characters, and an empty id are refused with a non-zero exit and nothing a shell would run on stdout.
     */
    @Test
    void containerSideRefusesUnknownAndOddIdsPrintingNothingToEval() throws Exception {
        Path state = state();
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf(state));
            try {
                p.allocateDevices(p.getDevices(), 2, env("container_1700000000000_0001_01_000002"));
            } finally {
                p.close();
            }
        }
        for (String id : List.of("container_1700000000000_0001_01_000099", "container_1;touch /tmp/x",
                "container_1\nexport CUDA_VISIBLE_DEVICES=0,1,2,3", "$(id)", "", "../../etc/passwd",
                "container_1700000000000_0001_01_00000")) {
            Result r = env(state, id);
            assertNotEquals(0, r.exit(), "id " + JSON.writeValueAsString(id) + " accepted: " + r.out());
            assertTrue(r.out().lines().noneMatch(l -> l.startsWith("export ")),
                    "id " + JSON.writeValueAsString(id) + " printed export lines on stdout (what eval runs): "
                            + r.out());
        }
    }

    /**
     * A container whose GPUs YARN handed out again (to another container) has no GPUs any more: {@code gpusched env}
     * (the container side) for the old id must not print the GPUs that now belong to the new container.
     */
    @Test
    void containerSideForAFinishedContainerDoesNotPrintItsSuccessorsGpus() throws Exception {
        Path state = state();
        String old = "container_1700000000000_0001_01_000002";
        String successor = "container_1700000000000_0001_01_000003";
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf(state));
            try {
                Set<Device> all = p.getDevices();
                Set<Integer> first = indices(inv, p.allocateDevices(all, 8, env(old)));
                assertEquals(8, first.size());
                // the old container finished; YARN offers all 8 again to the successor
                Set<Integer> second = indices(inv, p.allocateDevices(all, 8, env(successor)));
                assertEquals(8, second.size());
                Result r = env(state, old);
                assertNotEquals(0, r.exit(), "the finished container still 'has' GPUs: " + r.out());
                Result s = env(state, successor);
                assertEquals(0, s.exit(), s.out());
            } finally {
                p.close();
            }
        }
    }
}
