package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlReturn;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every NVML entry point the binding declares ({@link NvmlBinding#entryPoints()}, read from the binding itself, not
 * kept here) answering GPU_IS_LOST, UNKNOWN, TIMEOUT, NOT_SUPPORTED, INSUFFICIENT_SIZE and DRIVER_NOT_LOADED for one
 * GPU, through the fake compiled against the real nvml.h. The fake, not the inventory, says what each entry point is
 * about (init, node, one device, a pair) and counts that the injected error was really answered. Checked for every
 * case: the node opens (a typed BackendUnavailableException only where init itself fails), the GPU gets LOST for
 * GPU_IS_LOST and UNHEALTHY naming the call and code for the other errors (NOT_SUPPORTED is not a fault, except where
 * it leaves the GPU without identity or MIG layout), every other GPU is healthy and reads exactly as in a run
 * without faults, no exception escapes a public call, and NVML is shut down cleanly.
 */
@Tag("native")
class NvmlFaultInjectionTest {
    /** GPU_IS_LOST, UNKNOWN, TIMEOUT, NOT_SUPPORTED, INSUFFICIENT_SIZE, DRIVER_NOT_LOADED. */
    static final int[] CODES = {15, 999, 10, 3, 7, 9};
    /** NOT_SUPPORTED here still leaves the GPU without an identity. */
    static final Set<String> IDENTITY = Set.of("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID");
    /** NOT_SUPPORTED here, on a GPU in MIG mode, leaves its MIG layout unknown. */
    static final Set<String> MIG_LAYOUT = Set.of("nvmlDeviceGetMaxMigDeviceCount",
            "nvmlDeviceGetMigDeviceHandleByIndex");
    /**
     * Entry points the fake's scenarios reach only when another call does not answer: the precondition injected on
     * the same GPU. Nothing else is exempt from being reached.
     */
    static final Map<String, String> REACHED_ONLY_AFTER = Map.of("nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetMemoryInfo_v2");
    /** The per-process calls: a failing one is named in the device's per-process sample too. */
    static final Set<String> PER_PROCESS = Set.of("nvmlDeviceGetProcessUtilization",
            "nvmlDeviceGetComputeRunningProcesses_v3");
    static final int DGX1_TARGET = 3;
    static final int MIG_TARGET = 0;

    static Path lib;
    static Path sysfs;
    static final Map<Integer, Observed> BASELINE = new HashMap<>();
    static final Map<String, Integer> SCENARIO_OF = new LinkedHashMap<>();

    /** What one run shows through the public API. */
    record Observed(List<GpuDevice> devices, Map<Integer, GpuHealth> health, Map<Integer, List<Double>> metrics,
            Map<Integer, Optional<List<GpuProcess>>> processes, Map<Integer, List<Object>> usage,
            GpuTopology topology) {
    }

    static synchronized void prepare() throws Exception {
        if (lib != null) {
            return;
        }
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        Path dir = Files.createTempDirectory("gpusched-nvml-faults");
        Path built = FakeNvml.build(dir, false);
        FakeNvml.Control.bind(built);
        sysfs = dir.resolve("sys");
        for (String bus : List.of("06", "07", "0a", "0b", "85", "86", "89", "8a", "0f")) {
            Path d = Files.createDirectories(sysfs.resolve("bus/pci/devices/0000:" + bus + ":00.0"));
            Files.writeString(d.resolve("numa_node"), bus.compareTo("80") < 0 ? "0\n" : "1\n");
        }
        lib = built;
        for (int scenario : new int[]{FakeNvml.DGX1, FakeNvml.MIG}) {
            FakeNvml.Control.fake_nvml_reset();
            FakeNvml.Control.fake_nvml_set_scenario(scenario);
            try (NvmlInventory inv = NvmlInventory.open(options())) {
                await(() -> FakeNvml.Control.fake_nvml_calls_of("nvmlEventSetWait_v2", -1) > 0, "watcher waits");
                BASELINE.put(scenario, drive(inv));
            }
            int target = scenario == FakeNvml.DGX1 ? DGX1_TARGET : MIG_TARGET;
            for (String fn : NvmlBinding.entryPoints()) {
                int scope = FakeNvml.Control.fake_nvml_scope(fn);
                long calls = FakeNvml.Control.fake_nvml_calls_of(fn,
                        scope == FakeNvml.SCOPE_DEVICE || scope == FakeNvml.SCOPE_PAIR ? target : -1);
                if (calls > 0 || REACHED_ONLY_AFTER.containsKey(fn)) {
                    SCENARIO_OF.putIfAbsent(fn, scenario);
                }
            }
        }
        FakeNvml.Control.fake_nvml_reset();
    }

    static NvmlOptions options() {
        return NvmlOptions.defaults().withLibrary(lib).withSysfsRoot(sysfs)
                .withHealthWatch(true, Duration.ofMillis(20), Duration.ofHours(1));
    }

    static void await(BooleanSupplier condition, String what) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).as(what).isTrue();
    }

    static Observed drive(NvmlInventory inv) {
        GpuSample first = inv.sample();
        Map<Integer, Optional<List<GpuProcess>>> procs = new LinkedHashMap<>();
        Map<Integer, List<Object>> usage = new LinkedHashMap<>();
        for (GpuDevice d : inv.devices()) {
            procs.put(d.index(), inv.processes(d));
            Optional<ProcessUsageSample> u = inv.processUsage(d);
            usage.put(d.index(), u.isEmpty() ? List.of() : List.of(u.get().processes(),
                    u.get().utilizationUnmeasured(), u.get().memoryUnmeasured()));
        }
        GpuSample second = inv.sample();
        assertThat(second.metrics()).hasSameSizeAs(first.metrics()).hasSize(inv.devices().size());
        Map<Integer, List<Double>> metrics = new LinkedHashMap<>();
        for (GpuMetrics m : second.metrics()) {
            List<Double> v = new ArrayList<>();
            v.add(m.utilizationPercent().isPresent() ? m.utilizationPercent().getAsDouble() : null);
            v.add(m.memoryUsed().map(x -> (double) x.bytes()).orElse(null));
            v.add(m.temperatureCelsius().isPresent() ? m.temperatureCelsius().getAsDouble() : null);
            v.add(m.powerWatts().isPresent() ? m.powerWatts().getAsDouble() : null);
            v.add(m.energyMillijoules().isPresent() ? (double) m.energyMillijoules().getAsLong() : null);
            metrics.put(m.index(), v);
        }
        Map<Integer, GpuHealth> health = new LinkedHashMap<>();
        for (GpuDevice d : inv.devices()) {
            health.put(d.index(), inv.health(d));
        }
        return new Observed(inv.devices(), health, metrics, procs, usage, inv.topology());
    }

    static Stream<Arguments> cases() throws Exception {
        prepare();
        List<Arguments> out = new ArrayList<>();
        for (String fn : NvmlBinding.entryPoints()) {
            for (int code : CODES) {
                out.add(Arguments.of(fn, code));
            }
        }
        return out.stream();
    }

    /** Whether this test's setup loaded the fake (its assumption skips the test where gcc or nvml.h is absent). */
    private boolean prepared;

    @BeforeEach
    void reset() throws Exception {
        prepared = false;
        prepare();
        FakeNvml.Control.fake_nvml_reset();
        prepared = true;
    }

    @AfterEach
    void cleanShutdown() {
        if (!prepared) {
            return; // skipped before the fake was loaded: nothing native to check
        }
        assertThat(FakeNvml.Control.fake_nvml_initialized()).as("nvmlShutdown for every nvmlInit_v2").isZero();
        assertThat(FakeNvml.Control.fake_nvml_violations()).as("lifecycle violations seen by the fake").isZero();
        FakeNvml.Control.fake_nvml_reset();
    }

    @Test
    void everyEntryPointOfTheBindingIsModelledByTheFakeAndReached() {
        List<String> entryPoints = NvmlBinding.entryPoints();
        assertThat(entryPoints).hasSizeGreaterThan(30).doesNotHaveDuplicates()
                .contains("nvmlInit_v2", "nvmlDeviceGetUUID", "nvmlEventSetWait_v2");
        for (String fn : entryPoints) {
            assertThat(FakeNvml.Control.fake_nvml_scope(fn)).as("the fake models %s", fn).isPositive();
        }
        assertThat(SCENARIO_OF.keySet()).as("every entry point is called in one of the fake's scenarios")
                .containsExactlyInAnyOrderElementsOf(entryPoints);
    }

    @ParameterizedTest(name = "{0} answers {1}")
    @MethodSource("cases")
    void oneFailingEntryPointOnOneGpu(String fn, int code) throws Exception {
        int scenario = SCENARIO_OF.getOrDefault(fn, FakeNvml.DGX1);
        int target = scenario == FakeNvml.DGX1 ? DGX1_TARGET : MIG_TARGET;
        int scope = FakeNvml.Control.fake_nvml_scope(fn);
        FakeNvml.Control.fake_nvml_set_scenario(scenario);
        int gpu = scope == FakeNvml.SCOPE_DEVICE || scope == FakeNvml.SCOPE_PAIR ? target : -1;
        assertThat(FakeNvml.Control.fake_nvml_inject(fn, gpu, code)).as("the fake injects into %s", fn).isZero();
        String pre = REACHED_ONLY_AFTER.get(fn);
        if (pre != null) {
            FakeNvml.Control.fake_nvml_inject(pre, gpu, 3);
        }
        String nvmlCode = "NVML " + code + ":";

        NvmlInventory inv;
        try {
            inv = NvmlInventory.open(options());
        } catch (BackendUnavailableException e) {
            assertThat(scope).as("only a failing init may fail the node: %s", e.getMessage())
                    .isEqualTo(FakeNvml.SCOPE_INIT);
            assertThat(e.getMessage()).contains("NVML " + code);
            assertThat(FakeNvml.Control.fake_nvml_hits(fn)).isPositive();
            return;
        } catch (RuntimeException e) {
            throw new AssertionError("open threw " + e.getClass().getName() + ": " + e.getMessage(), e);
        }
        assertThat(scope).as("init answered %d, yet the node opened", code).isNotEqualTo(FakeNvml.SCOPE_INIT);
        Observed seen;
        try {
            seen = drive(inv);
            if (fn.equals("nvmlEventSetWait_v2")) {
                await(() -> FakeNvml.Control.fake_nvml_hits(fn) > 0, "the watcher met the injected error");
                seen = drive(inv);
            }
        } catch (RuntimeException e) {
            inv.close();
            throw new AssertionError("a public call threw " + e.getClass().getName() + ": " + e.getMessage(), e);
        }
        try {
            inv.close();
        } catch (RuntimeException e) {
            throw new AssertionError("close threw " + e.getClass().getName() + ": " + e.getMessage(), e);
        }
        assertThat(FakeNvml.Control.fake_nvml_hits(fn)).as("the injected error was answered").isPositive();

        Observed base = BASELINE.get(scenario);
        boolean node = scope == FakeNvml.SCOPE_NODE;
        List<GpuDevice> affected = new ArrayList<>();
        for (GpuDevice d : seen.devices()) {
            boolean hit = !node && d.properties().get("nvml.index").equals(String.valueOf(target));
            if (hit) {
                affected.add(d);
                continue;
            }
            GpuDevice expected = base.devices().stream().filter(b -> b.index() == d.index()).findFirst()
                    .orElseThrow(() -> new AssertionError("device " + d.index() + " is not in the run without faults"));
            assertThat(comparable(d, node)).as("GPU %d reads as without faults", d.index())
                    .isEqualTo(comparable(expected, node));
            assertThat(seen.health().get(d.index())).as("health of GPU %d", d.index()).isEqualTo(GpuHealth.HEALTHY);
            assertThat(seen.metrics().get(d.index())).as("metrics of GPU %d", d.index())
                    .isEqualTo(base.metrics().get(d.index()));
            assertThat(seen.processes().get(d.index())).as("processes of GPU %d", d.index())
                    .isEqualTo(base.processes().get(d.index()));
            assertThat(seen.usage().get(d.index())).as("per-process usage of GPU %d", d.index())
                    .isEqualTo(base.usage().get(d.index()));
        }
        List<Integer> unaffected = seen.devices().stream().filter(d -> !affected.contains(d))
                .map(GpuDevice::index).toList();
        assertThat(unaffected).as("the other GPUs are all there").hasSize(
                (int) base.devices().stream().filter(d -> node
                        || !d.properties().get("nvml.index").equals(String.valueOf(target))).count());
        for (int a : unaffected) {
            for (int b : unaffected) {
                assertThat(seen.topology().linkCount(a, b)).isEqualTo(base.topology().linkCount(a, b));
                assertThat(seen.topology().pcieLevel(a, b)).isEqualTo(base.topology().pcieLevel(a, b));
            }
        }
        if (node) {
            return;
        }
        assertThat(affected).as("the failing GPU is still listed").isNotEmpty();
        assertThat(seen.devices()).extracting(GpuDevice::uuid).doesNotHaveDuplicates();
        boolean fault = code != 3 || IDENTITY.contains(fn) || MIG_LAYOUT.contains(fn);
        if (scope == FakeNvml.SCOPE_PAIR) {
            fault = false; // a pair query cannot say which GPU failed; both got a live check, which they passed
        }
        for (GpuDevice d : affected) {
            if (PER_PROCESS.contains(fn)) {
                List<Object> u = seen.usage().get(d.index());
                assertThat(u).as("GPU %d's per-process sample after %s answered %d", d.index(), fn, code)
                        .hasSize(3);
                Object why = fn.equals("nvmlDeviceGetProcessUtilization") || fault ? u.get(1) : u.get(2);
                assertThat(why).as("the sample says why, naming the call and its answer")
                        .isEqualTo(Optional.of(fn + (fault && code == 7 ? " (the list kept growing)" : "") + ": "
                                + NvmlReturn.describe(code)));
            }
            GpuHealth h = seen.health().get(d.index());
            if (!fault) {
                assertThat(h).as("%s answering NOT_SUPPORTED is not a fault (GPU %d)", fn, d.index())
                        .isEqualTo(GpuHealth.HEALTHY);
                continue;
            }
            assertThat(h.state()).as("GPU %d after %s answered %d", d.index(), fn, code)
                    .isEqualTo(code == 15 ? GpuHealth.State.LOST : GpuHealth.State.UNHEALTHY);
            assertThat(h.reason()).hasValueSatisfying(r -> assertThat(r).contains(fn).contains(nvmlCode));
            if (!d.memoryKnown()) {
                assertThat(d.memory().bytes()).isZero();
            }
            if (IDENTITY.contains(fn)) {
                assertThat(d.uuid()).as("placeholder identity").startsWith(NvmlInventory.UNIDENTIFIED_PREFIX)
                        .doesNotStartWith("GPU-").doesNotStartWith("MIG-");
                assertThat(d.memoryKnown()).isFalse();
                assertThat(d.properties().get("nvml.identity")).contains(fn);
            }
        }
    }

    /** A device as a run without faults must show it; node-wide facts (driver version) left out for node faults. */
    static GpuDevice comparable(GpuDevice d, boolean node) {
        if (!node) {
            return d;
        }
        Map<String, String> props = new LinkedHashMap<>(d.properties());
        props.remove("cuda_driver_version");
        GpuDevice.Builder b = GpuDevice.builder().index(d.index()).uuid(d.uuid()).vendor(d.vendor()).name(d.name())
                .pciBusId(d.pciBusId()).properties(props);
        if (d.memoryKnown()) {
            b.memory(d.memory());
        } else {
            b.memoryUnknown();
        }
        d.computeCapability().ifPresent(b::computeCapability);
        d.numaNode().ifPresent(b::numaNode);
        d.minor().ifPresent(b::minor);
        d.parentUuid().ifPresent(b::parentUuid);
        return b.build();
    }
}
