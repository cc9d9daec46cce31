package io.gpusched.core.adversarial.input;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuTarget;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.NodeDescriptions;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Hostile inputs against the documented parser contract, written from the Javadoc alone: each parser either returns
 * or throws exactly its documented exception type with a message; never another type (a StackOverflowError or
 * NumberFormatException included), never a hang. The hang detector runs the parse on a daemon thread and fails if
 * it has not finished in a generous bound (not a speed assertion).
 */
@Tag("adversarial")
class HostileParserInputTest {

    private static final long HANG_BOUND_S = 20;

    /** Runs {@code parse}; returns its outcome: the value, or the throwable, failing on a hang. */
    private static Object outcome(Supplier<?> parse, String what) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        Thread t = new Thread(null, () -> {
            try {
                f.complete(parse.get());
            } catch (Throwable e) {
                f.complete(e);
            }
        }, "hostile-parse", 0);
        t.setDaemon(true);
        t.start();
        try {
            return f.get(HANG_BOUND_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            t.interrupt();
            fail("no answer within " + HANG_BOUND_S + " s (a hang) for " + what);
            return null;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Either a value or exactly {@code type} with a non-blank message. */
    private static Object returnsOrThrows(Class<? extends Throwable> type, Supplier<?> parse, String what) {
        Object o = outcome(parse, what);
        if (o instanceof Throwable e) {
            if (e.getClass() != type) {
                throw new AssertionError("for " + what + ": expected " + type.getSimpleName() + " or a value, got "
                        + e, e);
            }
            assertTrue(e.getMessage() != null && !e.getMessage().isBlank(), "blank message for " + what);
        }
        return o;
    }

    private static Throwable throwsExactly(Class<? extends Throwable> type, Supplier<?> parse, String what) {
        Object o = returnsOrThrows(type, parse, what);
        if (!(o instanceof Throwable e)) {
            throw new AssertionError("for " + what + ": expected " + type.getSimpleName() + ", got value " + o);
        }
        return e;
    }

    // ---- MemorySize ----

    @ParameterizedTest
    @ValueSource(strings = {"\u0664GB", "\u0664\u0660\u0669\u0666", "\uFF14GB", "4\uFF27\uFF22", "1e3GB", "1E3",
        "-0", "-0GB", "+4GB", "0x10GB", "4 GB GB", "9223372036854775807GB", "9223372036854775807MiB",
        "9223372036854775807B", "9223372036854775808B", "1.5B", "0.0000000000000000000000001GiB",
        "99999999999999999999999999999999999999999999999999GiB", "NaNGB", "InfinityGB", "4GB\u0000", "\uFEFF4GB",
        "4\u00A0GB", "4_096MB", "4,096MB", ".GB", "GB", "4..5GB", "", " ", "\t", "\n"})
    void memorySizeHostile(String text) {
        Object o = returnsOrThrows(IllegalArgumentException.class, () -> MemorySize.parse(text), "\"" + text + "\"");
        if (o instanceof MemorySize m) {
            assertTrue(m.bytes() >= 0);
            assertEquals(m, MemorySize.parse(m.toString()), "parses back");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"\u0664GB", "\uFF14GB", "4\uFF27\uFF22", "1e3GB", "-0GB", "\uFEFF4GB", "0x10GB",
        "9223372036854775807GB", "9223372036854775808B", "99999999999999999999999999999999999999999999999GiB"})
    void memorySizeRefusesNonAsciiNumbersAndOverflow(String text) {
        throwsExactly(IllegalArgumentException.class, () -> MemorySize.parse(text), "\"" + text + "\"");
    }

    @Test
    void memorySizeHugeScalarIsBounded() {
        String big = "1".repeat(5_000_000) + "GB";
        throwsExactly(IllegalArgumentException.class, () -> MemorySize.parse(big), "5M digits");
        String frac = "1." + "0".repeat(5_000_000) + "1GiB";
        returnsOrThrows(IllegalArgumentException.class, () -> MemorySize.parse(frac), "5M fraction digits");
    }

    // ---- CLI flags ----

    @ParameterizedTest
    @ValueSource(strings = {"--gpu=+2", "--gpu= 2", "--gpu=2 ", "-gpu=2", "--gpu", "--gpu=", "", " ", "--",
        "--gpu=\u0662", "--gpu=\uFF12", "--gpu=2e0", "--gpu=0x2", "--gpu=99999999999", "--gpu=-1",
        "--gpu-memory=\u0664GB", "--gpu-memory=1e3GB", "--target=node::", "--target=::0,,1",
        "--target=node::99999999999", "--gpu=2|--gpu=2", "--gpu=2|--gpus=2", "--label=a=1|--label=a=2",
        "--label=a=1|--label=a=1", "--target=n::0|--target=n::0", "--target=n::0|--target=m::1",
        "--gpu=1|--|--gpu=2", "--|--gpu=2", "--gpu=1|--", "--shared=0", "--lease=0s", "--label", "--label=",
        "--label==", "--label==v", "--gpu=2|extra", "--gpu|--gpu", "\u0000", "--gpu=\u0000"})
    void cliFlagsHostile(String joined) {
        List<String> args = List.of(joined.split("\\|", -1));
        returnsOrThrows(IllegalArgumentException.class, () -> GpuRequests.fromCliFlags(args), args.toString());
    }

    @ParameterizedTest
    @ValueSource(strings = {"--gpu=+2", "-gpu=2", "--gpu", "--gpu=", "--gpu=\u0662", "--gpu=\uFF12",
        "--gpu=2e0", "--gpu=0x2", "--gpu=99999999999", "--gpu=-1", "--gpu-memory=\u0664GB",
        "--target=node::", "--target=::0,,1", "--target=node::99999999999", "--gpu=2|--gpu=2",
        "--gpu=2|--gpus=2", "--label=a=1|--label=a=2", "--label=a=1|--label=a=1",
        "--target=n::0|--target=n::0", "--target=n::0|--target=m::1", "--shared=0", "--lease=0s",
        "--gpu|--gpu", "--gpu=\u0000"})
    void cliFlagsRefused(String joined) {
        List<String> args = List.of(joined.split("\\|", -1));
        Throwable e = throwsExactly(IllegalArgumentException.class, () -> GpuRequests.fromCliFlags(args),
                args.toString());
        String flag = args.get(0).replaceFirst("^-+", "").replaceFirst("=.*", "");
        assertTrue(e.getMessage().contains(flag), "message names the flag " + flag + ": " + e.getMessage());
    }

    @Test
    void cliFlagsWithNullElement() {
        List<String> args = new ArrayList<>();
        args.add("--gpu=1");
        args.add(null);
        returnsOrThrows(IllegalArgumentException.class, () -> GpuRequests.fromCliFlags(args), "[--gpu=1, null]");
    }

    // ---- resources maps ----

    static List<Object> hostileValues() {
        Map<String, Object> nested = new HashMap<>();
        nested.put("a", Map.of("b", 1));
        List<Object> self = new ArrayList<>();
        self.add(self);
        return List.of(Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, -0.0d, 1.5d, 1e300,
                Float.NaN, new BigInteger("99999999999999999999999999"), new BigDecimal("1E+400"),
                new BigDecimal("2.0000000000000000001"), Boolean.TRUE, Boolean.FALSE, nested, List.of(1, 2),
                self, "", " ", "\u0662", "2 ", "+2", "NaN", "0x2", new Object(), 'x', (byte) 2, (short) 2,
                Long.MAX_VALUE, Long.MIN_VALUE, Integer.MIN_VALUE, new java.util.concurrent.atomic.AtomicLong(2),
                new StringBuilder("2"));
    }

    @Test
    void resourcesHostileValues() {
        for (String key : List.of("gpu_count", "gpu_memory_mb", "gpu_memory", "gpu_model", "gpu_vendor",
                "gpu_min_compute_capability", "gpu_shared_memory_mb")) {
            for (Object v : hostileValues()) {
                Map<String, Object> m = new HashMap<>();
                m.put(key, v);
                if (!key.equals("gpu_count")) {
                    m.put("gpu_count", 1);
                }
                String what = key + "=" + describe(v) + " (" + v.getClass().getSimpleName() + ")";
                Object o = returnsOrThrows(IllegalArgumentException.class, () -> GpuRequests.fromResources(m), what);
                if (o instanceof java.util.Optional<?> opt && opt.isPresent()) {
                    assertTrue(((io.gpusched.core.GpuRequest) opt.get()).count() >= 1, what);
                }
            }
        }
    }

    private static String describe(Object v) {
        try {
            String s = String.valueOf(v);
            return s.length() > 40 ? s.substring(0, 40) : s;
        } catch (Throwable e) {
            return "<" + e.getClass().getSimpleName() + ">";
        }
    }

    @Test
    void resourcesNonFiniteAndFractionalCountsRefused() {
        for (Object v : List.of(Double.NaN, Double.POSITIVE_INFINITY, 1.5d, Boolean.TRUE,
                new BigInteger("99999999999999999999999999"), "\u0662", List.of(1, 2))) {
            Map<String, Object> m = new HashMap<>();
            m.put("gpu_count", v);
            throwsExactly(IllegalArgumentException.class, () -> GpuRequests.fromResources(m), "gpu_count=" + v);
        }
        for (Object v : List.of(Double.NaN, Double.POSITIVE_INFINITY, -0.5d, 1e300,
                new BigInteger("99999999999999999999999999"), Boolean.TRUE)) {
            Map<String, Object> m = new HashMap<>();
            m.put("gpu_count", 1);
            m.put("gpu_memory_mb", v);
            throwsExactly(IllegalArgumentException.class, () -> GpuRequests.fromResources(m), "gpu_memory_mb=" + v);
        }
    }

    // ---- targets ----

    @ParameterizedTest
    @ValueSource(strings = {"node::", "::0", "node::0,,1", "node::-1", "node::99999999999", "node::+1", "node:: 1",
        "node::1 ", "node::0,0", "node::\u0661", "node::\uFF11", "::", ":::0", "node:::0", "node::0::1",
        "node::0,", ",", "", " ", "\u0000", "node\u0000::0", "node::0x1", "no de::0", "node::1e2",
        "node::2147483648"})
    void targetsHostile(String text) {
        Object o = returnsOrThrows(IllegalArgumentException.class, () -> GpuTarget.parse(text), "\"" + text + "\"");
        if (o instanceof GpuTarget t) {
            assertEquals(t.indices().stream().distinct().count(), t.indices().size(), "distinct: " + text);
            assertTrue(t.indices().stream().allMatch(i -> i >= 0), "non-negative: " + text);
            assertEquals(t, GpuTarget.parse(t.toString()), "parses back: " + text);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"node::", "node::0,,1", "node::-1", "node::99999999999", "node::\u0661", "node::\uFF11",
        "node::0,", "node::+1", "node::2147483648", "node::0,0"})
    void targetsRefused(String text) {
        throwsExactly(IllegalArgumentException.class, () -> GpuTarget.parse(text), "\"" + text + "\"");
    }

    @Test
    void targetIndicesHuge() {
        String many = "0" + ",0".repeat(2_000_000);
        throwsExactly(IllegalArgumentException.class, () -> GpuTarget.parse("n::" + many), "4M repeated zeros");
        String longNum = "n::" + "9".repeat(3_000_000);
        throwsExactly(IllegalArgumentException.class, () -> GpuTarget.parse(longNum), "3M digit index");
    }

    // ---- YAML: GpuConfig and node descriptions ----

    static String billionLaughs() {
        StringBuilder sb = new StringBuilder("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for (int i = 1; i < 30; i++) {
            sb.append("a").append(i).append(": &a").append(i).append(" [");
            for (int j = 0; j < 10; j++) {
                sb.append(j == 0 ? "" : ", ").append("*a").append(i - 1);
            }
            sb.append("]\n");
        }
        return sb.toString();
    }

    static List<String> hostileYaml() {
        List<String> l = new ArrayList<>();
        l.add(billionLaughs());
        l.add("gpu:\n  backends: " + billionLaughs().replace("\n", " ").replace("a0: ", "[").replace("]", "]") + "\n");
        l.add("gpu:\n  backends: " + "[".repeat(20_000) + "]".repeat(20_000) + "\n");
        l.add("gpu:\n  x: " + "{a: ".repeat(20_000) + "1" + "}".repeat(20_000) + "\n");
        l.add("[".repeat(200_000));
        l.add("gpu:\n  strategy: " + "p".repeat(2_000_000) + "\n");
        l.add("gpu:\n  max_gpus_per_request: !!int 0x\n");
        l.add("gpu:\n  max_gpus_per_request: !!int four\n");
        l.add("gpu:\n  max_gpus_per_request: !!int 0x7fffffffffffffffff\n");
        l.add("gpu:\n  max_gpus_per_request: !!float .nan\n");
        l.add("gpu:\n  max_gpus_per_request: .nan\n");
        l.add("gpu:\n  max_gpus_per_request: 1e400\n");
        l.add("gpu:\n  max_gpus_per_request: 99999999999999999999999\n");
        l.add("gpu:\n  max_gpus_per_request: 0b11\n");
        l.add("gpu:\n  max_gpus_per_request: 1_0\n");
        l.add("gpu:\n  max_gpus_per_request: 2.5\n");
        l.add("gpu:\n  max_gpus_per_request: -1\n");
        l.add("gpu:\n  enabled: !!bool maybe\n");
        l.add("gpu:\n  enabled: maybe\n");
        l.add("gpu:\n  enabled: 1\n");
        l.add("gpu:\n  enabled: ~\n");
        l.add("gpu: !!str {a: 1}\n");
        l.add("gpu: !!map [1, 2]\n");
        l.add("gpu: !custom {enabled: true}\n");
        l.add("gpu:\n  enabled: !custom true\n");
        l.add("!!java.io.File {path: /tmp}\n");
        l.add("gpu: !!javax.script.ScriptEngineManager [!!java.net.URLClassLoader [[!!java.net.URL [\"http://127.0.0.1:1/\"]]]]\n");
        l.add("gpu:\n  cuda_paths: [!!java.io.File /tmp]\n");
        l.add("gpu: !<tag:yaml.org,2002:java.util.HashMap> {}\n");
        l.add("gpu:\n  backends: !!set {nvml, procfs}\n");
        l.add("gpu:\n  backends: !!omap [a: 1]\n");
        l.add("gpu:\n  backends: !!pairs [a: 1]\n");
        l.add("gpu:\n  strategy: !!binary '???'\n");
        l.add("gpu:\n  strategy: !!timestamp 2001-12-14\n");
        l.add("gpu:\n  drain: {timeout: !!binary aGVsbG8=}\n");
        l.add("gpu:\n  drain: {timeout: 2001-12-14}\n");
        l.add("base: &b {enabled: false}\ngpu:\n  <<: *b\n");
        l.add("gpu:\n  <<: {enabled: false}\n");
        l.add("gpu:\n  <<: [1, 2]\n");
        l.add("gpu:\n  enabled: true\n  enabled: false\n");
        l.add("gpu:\n  enabled: true\ngpu:\n  enabled: false\n");
        l.add("gpu:\n  \"ena\\0bled\": true\n");
        l.add("gpu:\n  \"strategy\\0\": packing\n");
        l.add("\uFEFFgpu:\n  enabled: true\n");
        l.add("gpu:\r\n  enabled: true\r\n");
        l.add("gpu:\r  enabled: true\r");
        l.add("gpu:\n  \uFEFFenabled: true\n");
        l.add("gpu:\n  enabled: true\n---\ngpu:\n  enabled: false\n");
        l.add("---\n---\n");
        l.add("...\n");
        l.add("%YAML 1.1\n---\ngpu: {}\n");
        l.add("%YAML 9.9\n---\ngpu: {}\n");
        l.add("%TAG ! tag:yaml.org,2002:java.io.\n---\ngpu: !File /tmp\n");
        l.add("gpu:\n  cuda_paths: [\"/opt/cu\\0da\"]\n");
        l.add("gpu:\n  cuda_paths: [\"\"]\n");
        l.add("gpu:\n  cuda_paths: [~]\n");
        l.add("gpu:\n  cuda_paths: [{a: 1}]\n");
        l.add("gpu:\n  cuda_paths: /opt/cuda\n");
        l.add("gpu:\n  backends: [~]\n");
        l.add("gpu:\n  backends: [[nvml]]\n");
        l.add("gpu:\n  ? [a, b]\n  : 1\n");
        l.add("? {a: 1}\n: 1\n");
        l.add("gpu:\n  ~: 1\n");
        l.add("gpu:\n  1: 1\n");
        l.add("gpu: &x\n  a: *x\n");
        l.add("a: &x [*x]\n");
        l.add("a: *undefined\n");
        l.add("gpu:\n  rate_limit: {per_owner_per_second: .inf, burst: 1}\n");
        l.add("gpu:\n  rate_limit: {per_owner_per_second: .nan, burst: 1}\n");
        l.add("gpu:\n  rate_limit: {per_owner_per_second: -.inf, burst: 1}\n");
        l.add("gpu:\n  rate_limit: {per_owner_per_second: 1, burst: 99999999999}\n");
        l.add("gpu:\n  drain: {timeout: 99999999999999999999d}\n");
        l.add("gpu:\n  drain: {timeout: 9223372036854775807d}\n");
        l.add("gpu:\n  drain: {timeout: -5m}\n");
        l.add("gpu:\n  drain: {timeout: 1e3s}\n");
        l.add("gpu:\n  drain: {timeout: \u0665m}\n");
        l.add("gpu:\n  thermal: {max_sample_age: PT-1S}\n");
        l.add("gpu:\n  state_dir: \"/var/\\0lib\"\n");
        l.add("gpu:\n  state_dir: [a]\n");
        l.add("\"\\uD800\": 1\n");
        l.add("gpu: \"\\uD800\"\n");
        l.add("\u0000");
        l.add("gpu:\n\tenabled: true\n");
        l.add("gpu:\n  enabled: 'unterminated\n");
        l.add("gpu: " + "&a ".repeat(1) + "{}\n" + "x: " + "*a ".repeat(1) + "\n");
        l.add("x: &" + "a".repeat(1_000_000) + " 1\n");
        l.add("x: " + "!".repeat(100_000) + " 1\n");
        l.add("gpu:\n" + "  k".repeat(0) + String.join("", java.util.Collections.nCopies(100_000, "  - a\n")));
        return l;
    }

    @Test
    void gpuConfigHostileYaml() {
        List<String> all = hostileYaml();
        for (int i = 0; i < all.size(); i++) {
            String y = all.get(i);
            String what = "yaml #" + i + ": " + describe(y);
            Object o = returnsOrThrows(GpuConfigException.class, () -> GpuConfig.parse(y, "hostile.yaml"), what);
            if (o instanceof Throwable e) {
                assertTrue(e.getMessage().startsWith("hostile.yaml"), what + ": " + e.getMessage());
            }
        }
    }

    @Test
    void gpuConfigRefusesTypedSurprises() {
        for (String y : List.of("gpu:\n  enabled: !!bool maybe\n", "gpu:\n  enabled: maybe\n",
                "gpu:\n  backends: !!set {nvml, procfs}\n", "gpu:\n  max_gpus_per_request: !!int 0x\n",
                "gpu:\n  max_gpus_per_request: !!float .nan\n", "gpu:\n  max_gpus_per_request: 2.5\n",
                "gpu:\n  enabled: true\n  enabled: false\n", "gpu:\n  enabled: true\n---\ngpu:\n  enabled: false\n",
                "!!java.io.File {path: /tmp}\n", "gpu: !custom {enabled: true}\n",
                "gpu:\n  cuda_paths: [\"/opt/cu\\0da\"]\n", "gpu:\n  \"ena\\0bled\": true\n",
                "gpu:\n  rate_limit: {per_owner_per_second: .nan, burst: 1}\n", billionLaughs())) {
            throwsExactly(GpuConfigException.class, () -> GpuConfig.parse(y, "hostile.yaml"), describe(y));
        }
    }

    @Test
    void gpuConfigDeepNestingIsTypedNotStackOverflow() {
        for (int depth : new int[]{1_000, 10_000, 100_000}) {
            String y = "gpu:\n  backends: " + "[".repeat(depth) + "]".repeat(depth) + "\n";
            throwsExactly(GpuConfigException.class, () -> GpuConfig.parse(y, "deep.yaml"), "depth " + depth);
            String m = "gpu: " + "{a: ".repeat(depth) + "1" + "}".repeat(depth) + "\n";
            throwsExactly(GpuConfigException.class, () -> GpuConfig.parse(m, "deep.yaml"), "map depth " + depth);
        }
    }

    static String node(String devices) {
        return "node: n\ndefaults: {vendor: NVIDIA, name: NVIDIA A10, memory: 24GiB, compute_capability: \"8.6\"}\n"
                + "devices:\n" + devices;
    }

    static List<String> hostileNodes() {
        List<String> l = new ArrayList<>(hostileYaml());
        l.add(node("  - {index: 0}\n  - {index: 60000}\n"));
        l.add(node("  - {index: 0}\n  - {index: 2147483647}\n"));
        l.add(node("  - {index: -1}\n"));
        l.add(node("  - {index: 99999999999}\n"));
        l.add(node("  - {index: !!int 0x}\n"));
        l.add(node("  - {index: !!float .nan}\n"));
        l.add(node("  - {index: .nan}\n"));
        l.add(node("  - {index: 0.5}\n"));
        l.add(node("  - {index: 0, memory: \u0664GB}\n"));
        l.add(node("  - {index: 0, memory: 1e3GB}\n"));
        l.add(node("  - {index: 0, memory: 9223372036854775807GB}\n"));
        l.add(node("  - {index: 0, memory: !!binary '???'}\n"));
        l.add(node("  - {index: 0, compute_capability: !!float .inf}\n"));
        l.add(node("  - {index: 0, compute_capability: \"99999999999.0\"}\n"));
        l.add(node("  - {index: 0, compute_capability: \"8.\"}\n"));
        l.add(node("  - {index: 0, numa_node: -5}\n"));
        l.add(node("  - {index: 0, numa_node: 99999999999}\n"));
        l.add(node("  - {index: 0, minor: -1}\n"));
        l.add(node("  - {index: 0, minor: 99999999999}\n"));
        l.add(node("  - {index: 0, pci_bus_id: \"\\0\"}\n"));
        l.add(node("  - {index: 0, vendor: !!java.lang.Object {}}\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1, 99999999999]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1, -4]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 0, 4]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 7, 4]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1, 4, 5]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1, 4], [1, 0, 4]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: [0, 1, 4]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nlinks: 5\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nfabric_links: -1\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\nfabric_links: 99999999999\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\npcie: [[0, 1, BOGUS]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\npcie: [[0, 1, ~]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 1}\npcie: [[0, 5, SINGLE]]\n"));
        l.add(node("  - {index: 0}\n  - {index: 0}\n"));
        l.add(node("  - ~\n"));
        l.add(node("  - 5\n"));
        l.add(node("  - [index, 0]\n"));
        l.add("node: n\ndevices: []\n");
        l.add("node: n\ndevices: ~\n");
        l.add("node: ~\ndevices: [{index: 0}]\n");
        l.add("node: [a]\ndevices: [{index: 0}]\n");
        l.add("node: n\ndefaults: &d {vendor: NVIDIA, name: X, memory: 1GiB}\ndevices:\n  - {<<: *d, index: 0}\n");
        StringBuilder many = new StringBuilder();
        for (int i = 0; i < 1100; i++) {
            many.append("  - {index: ").append(i).append("}\n");
        }
        l.add(node(many.toString()));
        return l;
    }

    @Test
    void nodeDescriptionsHostile() {
        List<String> all = hostileNodes();
        for (int i = 0; i < all.size(); i++) {
            String y = all.get(i);
            String what = "node #" + i + ": " + describe(y);
            Object o = returnsOrThrows(GpuConfigException.class, () -> NodeDescriptions.parse(y, "node.yaml"), what);
            if (o instanceof Throwable e) {
                assertTrue(e.getMessage().contains("node.yaml"), what + ": " + e.getMessage());
            } else {
                var inv = (io.gpusched.core.sim.SimulatedGpuInventory) o;
                var idx = inv.devices().stream().map(d -> d.index()).toList();
                assertEquals(idx.stream().distinct().count(), idx.size(), what);
                assertFalse(idx.stream().anyMatch(x -> x < 0), what);
            }
        }
    }

    @Test
    void nodeDescriptionsRefuseSurprises() {
        for (String y : List.of(node("  - {index: -1}\n"), node("  - {index: 0.5}\n"), node("  - {index: .nan}\n"),
                node("  - {index: 0}\n  - {index: 0}\n"), node("  - {index: 0, memory: \u0664GB}\n"),
                node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 0, 4]]\n"),
                node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 7, 4]]\n"),
                node("  - {index: 0}\n  - {index: 1}\nlinks: [[0, 1, -4]]\n"),
                node("  - {index: 0, vendor: !!java.lang.Object {}}\n"))) {
            throwsExactly(GpuConfigException.class, () -> NodeDescriptions.parse(y, "node.yaml"), describe(y));
        }
    }

    @Test
    @SuppressWarnings({"unchecked", "rawtypes"})
    void resourcesWithNonStringKeys() {
        for (Object key : List.of(1, Boolean.TRUE, List.of("gpu_count"), new StringBuilder("gpu_count"), 'g')) {
            Map raw = new HashMap();
            raw.put(key, 2);
            raw.put("gpu_count", 1);
            returnsOrThrows(IllegalArgumentException.class, () -> GpuRequests.fromResources((Map<String, ?>) raw),
                    "key " + key + " (" + key.getClass().getSimpleName() + ")");
        }
        Map<String, Object> m = new HashMap<>();
        m.put("gpu_count", 1);
        m.put("GPU_COUNT", 5);
        m.put("gpu_count ", 5);
        m.put("gpu_\u0000count", 5);
        returnsOrThrows(IllegalArgumentException.class, () -> GpuRequests.fromResources(m), "look-alike keys");
    }
}
