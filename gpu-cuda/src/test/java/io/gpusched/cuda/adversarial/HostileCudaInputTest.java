package io.gpusched.cuda.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cuda.Compatibility;
import io.gpusched.cuda.Compatibility.Verdict;
import io.gpusched.cuda.CompatibilityTable;
import io.gpusched.cuda.CudaInstallation;
import io.gpusched.cuda.CudaInstallations;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.cuda.CudaSearch;
import io.gpusched.cuda.CudaVersion;
import io.gpusched.cuda.DataCenterGpus;
import io.gpusched.cuda.DriverVersion;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile CUDA inputs, written from the public Javadoc alone: version parsers throw exactly
 * IllegalArgumentException or return; discovery reports problems and never throws or hangs (FIFOs, symlink loops, a
 * library dir that links to /); the compatibility verdicts follow NVIDIA's published minimum-driver table
 * ("CUDA Toolkit and Corresponding Driver Versions", Linux, toolkit GA releases); data-centre names with vendor
 * prefixes. The hang detector runs the call on a daemon thread and fails when it has not finished in a generous
 * bound (a hang, not a speed assertion).
 */
@Tag("adversarial")
class HostileCudaInputTest {

    private static final long HANG_BOUND_S = 30;

    @TempDir
    Path tmp;

    private static Object outcome(Supplier<?> call, String what) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        Thread t = new Thread(null, () -> {
            try {
                f.complete(call.get());
            } catch (Throwable e) {
                f.complete(e);
            }
        }, "hostile-cuda", 0);
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

    private static Object valueOrIae(Supplier<?> call, String what) {
        Object o = outcome(call, what);
        if (o instanceof Throwable e) {
            if (e.getClass() != IllegalArgumentException.class) {
                throw new AssertionError("for " + what + ": expected IllegalArgumentException or a value, got " + e, e);
            }
            assertTrue(e.getMessage() != null && !e.getMessage().isBlank(), what);
        }
        return o;
    }

    // ---- version parsers ----

    @Test
    void versionParsersHostile() {
        List<String> inputs = Arrays.asList(null, "", " ", "12", "12.4", "12.4.127", "12.1.20230222", ">=12.1",
                ">= 12.1", ">=", "=12.4", "==12.4", "12..4", "12.", ".4", "\u0661\u0662.\u0664", "\uFF11\uFF12.4",
                "99999999999", "12.99999999999", "12.4.99999999999", "2147483648.0", "-12", "0", "0.0", ">=0.1",
                "12.-1", "1e2", "12.4\u0000", "\uFEFF12.4", "12.4 ", " 12.4", ">=12.1,<13", "12.4.127.5", "12,4",
                "v12.4", "12.4-rc1", "1".repeat(200_000), "12." + "9".repeat(200_000));
        for (String s : inputs) {
            String what = s == null ? "null" : "\"" + (s.length() > 40 ? s.substring(0, 40) + "..." : s) + "\"";
            Object v = valueOrIae(() -> CudaVersion.parse(s), "CudaVersion " + what);
            if (v instanceof CudaVersion cv) {
                assertEquals(cv, CudaVersion.parse(cv.toString()), "parses back: " + what);
            }
            // CudaRequirement.toString() is a description ("CUDA 12.x"), not documented to parse back
            Object r = valueOrIae(() -> CudaRequirement.parse(s), "CudaRequirement " + what);
            if (r instanceof CudaRequirement cr) {
                cr.minimum().or(cr::exact)
                        .ifPresent(named -> assertTrue(cr.accepts(named), "accepts what it names: " + what));
            }
            Object d = valueOrIae(() -> DriverVersion.parse(s), "DriverVersion " + what);
            if (d instanceof DriverVersion dv) {
                Object b = outcome(dv::branch, "branch of " + what);
                assertFalse(b instanceof Throwable, "branch() of an accepted driver " + what + " threw " + b);
                assertEquals(0, dv.compareTo(DriverVersion.parse(dv.toString())), what);
            }
        }
    }

    @Test
    void unicodeAndSignedVersionsAreRefused() {
        for (String s : List.of("\u0661\u0662.\u0664", "\uFF11\uFF12.4", "-12", "+12.4", "12.4\u0000", "abc")) {
            assertTrue(valueOrIae(() -> CudaVersion.parse(s), s) instanceof IllegalArgumentException,
                    "CudaVersion " + s);
        }
        for (String s : List.of("\u0661\u0662.\u0664", "\uFF11\uFF12.4", "-12", "+12.4", "abc", "1\u00002.4")) {
            assertTrue(valueOrIae(() -> DriverVersion.parse(s), s) instanceof IllegalArgumentException, "Driver " + s);
        }
        // DriverVersion.parse trims (String.trim: control characters too); what it keeps is clean
        assertEquals("12.4", DriverVersion.parse("12.4\u0000").text());
    }

    @Test
    void driverVersionsCompareNumerically() {
        assertEquals(0, DriverVersion.parse("535.104.05").compareTo(DriverVersion.parse("535.104.5")));
        assertTrue(DriverVersion.parse("535.104.05").atLeast(DriverVersion.parse("535.104.5")));
        assertTrue(DriverVersion.parse("535.104.5").atLeast(DriverVersion.parse("535.104.05")));
        assertTrue(DriverVersion.parse("580").compareTo(DriverVersion.parse("580.65.06")) < 0);
        assertTrue(DriverVersion.parse("580.65").compareTo(DriverVersion.parse("580.65.06")) < 0);
        assertTrue(DriverVersion.parse("580.100").compareTo(DriverVersion.parse("580.65.06")) > 0);
        assertEquals(580, DriverVersion.parse("580").branch());
        assertTrue(valueOrIae(() -> DriverVersion.parse("abc"), "abc") instanceof IllegalArgumentException);
        // judged the same whichever way the same driver is written
        CompatibilityTable t = CompatibilityTable.builtIn();
        CudaVersion v122 = CudaVersion.parse("12.2");
        assertEquals(judge(t, v122, "535.104.05").verdict(), judge(t, v122, "535.104.5").verdict());
    }

    // ---- the published table ----

    private static Compatibility judge(CompatibilityTable t, CudaVersion v, String driver) {
        return Compatibility.judge(t, v, DriverVersion.parse(driver), Optional.empty(), Optional.empty(), false);
    }

    /** {toolkit, minimum Linux driver of its GA release, the same minus one in the last part}. */
    private static final String[][] NVIDIA_TABLE = {
        {"13.0", "580.65.06", "580.65.05"},
        {"12.9", "575.51.03", "575.51.02"},
        {"12.8", "570.26", "570.25"},
        {"12.6", "560.28.03", "560.28.02"},
        {"12.5", "555.42.02", "555.42.01"},
        {"12.4", "550.54.14", "550.54.13"},
        {"12.3", "545.23.06", "545.23.05"},
        {"12.2", "535.54.03", "535.54.02"},
        {"12.1", "530.30.02", "530.30.01"},
        {"12.0", "525.60.13", "525.60.12"},
        {"11.8", "520.61.05", "520.61.04"},
        {"11.7", "515.43.04", "515.43.03"},
        {"11.6", "510.39.01", "510.39.00"},
        {"11.5", "495.29.05", "495.29.04"},
        {"11.4", "470.42.01", "470.42.00"},
        {"11.3", "465.19.01", "465.19.00"},
        {"11.2", "460.27.03", "460.27.02"},
        {"11.1", "455.23", "455.22"},
        {"10.2", "440.33", "440.32"},
        {"10.1", "418.39", "418.38"},
        {"10.0", "410.48", "410.47"},
        {"9.2", "396.26", "396.25"},
        {"9.1", "390.46", "390.45"},
        {"9.0", "384.81", "384.80"},
    };

    @Test
    void publishedTableAtAndBelowEachMinimum() {
        CompatibilityTable t = CompatibilityTable.builtIn();
        List<String> wrong = new ArrayList<>();
        for (String[] row : NVIDIA_TABLE) {
            CudaVersion v = CudaVersion.parse(row[0]);
            Compatibility at = judge(t, v, row[1]);
            if (at.verdict() != Verdict.COMPATIBLE) {
                wrong.add(row[0] + " on " + row[1] + ": " + at.verdict() + " (" + at.message() + ")");
            }
            Compatibility below = judge(t, v, row[2]);
            if (below.verdict() == Verdict.COMPATIBLE) {
                wrong.add(row[0] + " on " + row[2] + ": COMPATIBLE although below the minimum " + row[1]);
            }
            if (v.major() < 11 && below.verdict() != Verdict.INCOMPATIBLE) {
                wrong.add(row[0] + " on " + row[2] + ": " + below.verdict() + ", expected INCOMPATIBLE (no minor"
                        + " version compatibility before 11)");
            }
            assertFalse(below.message().isBlank(), row[0]);
        }
        assertEquals(List.of(), wrong);
    }

    @Test
    void unknownOldAndUnknownNewAreWordedDifferently() {
        CompatibilityTable t = CompatibilityTable.builtIn();
        Compatibility old = judge(t, CudaVersion.parse("7.5"), "580.65.06");
        Compatibility fresh = judge(t, CudaVersion.parse("99.0"), "580.65.06");
        assertNotEquals(old.message(), fresh.message());
        assertFalse(old.message().contains("newer"), old.message());
        // the refusal names distinct drivers, not one driver twice
        Compatibility r = judge(t, CudaVersion.parse("13.0"), "535.54.03");
        assertFalse(r.verdict().equals(Verdict.COMPATIBLE));
        String m = r.message();
        int first = m.indexOf("580.65.06");
        assertTrue(first < 0 || m.indexOf("580.65.06", first + 1) < 0, "names one driver twice: " + m);
    }

    // ---- data-centre names ----

    @Test
    void dataCentreNames() {
        for (String n : List.of("NVIDIA A10G", "Tesla T4", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
                "NVIDIA A100-PCIE-40GB", "NVIDIA A10", "NVIDIA A2", "NVIDIA A16", "NVIDIA A30", "NVIDIA A40",
                "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA H20", "NVIDIA L4", "NVIDIA L40",
                "NVIDIA L40S", "NVIDIA B200", "NVIDIA GB200", "Tesla V100-SXM2-16GB", "nvidia a10g")) {
            assertTrue(DataCenterGpus.isDataCenter(n), n);
        }
        for (String n : List.of("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3080 Ti Laptop GPU",
                "NVIDIA TITAN V", "NVIDIA GeForce GTX 1080", "NVIDIA RTX A1000", "NVIDIA A100X0", "A10GX", "",
                " ", "NVIDIA", "\u0000", "NVIDIA GeForce A100")) {
            Object o = outcome(() -> DataCenterGpus.isDataCenter(n), n);
            assertEquals(Boolean.FALSE, o, "\"" + n + "\"");
        }
        Object o = outcome(() -> DataCenterGpus.isDataCenter(null), "null");
        assertTrue(o instanceof Boolean || o instanceof NullPointerException || o instanceof IllegalArgumentException,
                "null name: " + o);
        String huge = "NVIDIA " + "A10 ".repeat(500_000);
        assertTrue(outcome(() -> DataCenterGpus.isDataCenter(huge), "huge name") instanceof Boolean);
    }

    // ---- installations that lie ----

    private Discovery discover(Path... extra) {
        Object o = outcome(() -> CudaInstallations.discover(
                new CudaSearch(tmp.resolve("fsroot"), Map.of(), List.of(extra), false)), "discover " + List.of(extra));
        if (o instanceof Throwable e) {
            throw new AssertionError("discover threw " + e, e);
        }
        return new Discovery((CudaInstallations.Discovery) o);
    }

    private record Discovery(CudaInstallations.Discovery d) {
        List<CudaInstallation> installations() {
            return d.installations();
        }
    }

    private Path cudaRoot(String name) throws IOException {
        Path root = tmp.resolve(name);
        Files.createDirectories(root.resolve("lib64"));
        Files.createDirectories(root.resolve("include"));
        Files.createDirectories(root.resolve("bin"));
        Files.createFile(root.resolve("lib64/libcudart.so.12.6.77"));
        Files.createSymbolicLink(root.resolve("lib64/libcudart.so.12"), Path.of("libcudart.so.12.6.77"));
        return root;
    }

    private static boolean mkfifo(Path p) {
        try {
            Process pr = new ProcessBuilder("mkfifo", p.toString()).redirectErrorStream(true).start();
            return pr.waitFor(10, TimeUnit.SECONDS) && pr.exitValue() == 0;
        } catch (IOException | InterruptedException e) {
            return false;
        }
    }

    @Test
    void versionFilesThatAreFifosDoNotBlock() throws IOException {
        Path root = cudaRoot("cuda-fifo");
        assumeTrue(mkfifo(root.resolve("version.json")), "mkfifo not available");
        assumeTrue(mkfifo(root.resolve("version.txt")), "mkfifo not available");
        assumeTrue(mkfifo(root.resolve("include/cuda.h")), "mkfifo not available");
        discover(root);
    }

    @Test
    void hugeAndDeepVersionJson() throws IOException {
        Path a = cudaRoot("cuda-huge");
        Files.writeString(a.resolve("version.json"), "{\"cuda\": {\"name\": \"CUDA SDK\", \"version\": \""
                + "1".repeat(10_000_000) + "\"}}");
        Path b = cudaRoot("cuda-deep");
        Files.writeString(b.resolve("version.json"), "[".repeat(200_000) + "]".repeat(200_000));
        Path c = cudaRoot("cuda-badutf8");
        Files.write(c.resolve("version.json"), new byte[]{'{', (byte) 0xff, (byte) 0xfe, 0, '"', (byte) 0xc3});
        Path d = cudaRoot("cuda-bignum");
        Files.writeString(d.resolve("version.json"),
                "{\"cuda\": {\"version\": \"99999999999.4.1\"}, \"cuda_cudart\": {\"version\": \"12.99999999999\"}}");
        Path e = cudaRoot("cuda-txt");
        Files.writeString(e.resolve("version.txt"), "CUDA Version 99999999999.2.89\n");
        Path f = cudaRoot("cuda-h");
        Files.writeString(f.resolve("include/cuda.h"), "#define CUDA_VERSION 999\n");
        Path g = cudaRoot("cuda-h2");
        Files.writeString(g.resolve("include/cuda.h"), "#define CUDA_VERSION 99999999999999\n");
        Path h = cudaRoot("cuda-h3");
        Files.writeString(h.resolve("include/cuda.h"), "#define CUDA_VERSION -12040\n");
        Path i = cudaRoot("cuda-json-types");
        Files.writeString(i.resolve("version.json"),
                "{\"cuda\": {\"version\": 12.4}, \"cuda_cudart\": {\"version\": [1, 2]}}");
        Path j = cudaRoot("cuda-json-null");
        Files.writeString(j.resolve("version.json"), "null");
        Discovery r = discover(a, b, c, d, e, f, g, h, i, j);
        for (CudaInstallation inst : r.installations()) {
            inst.version().ifPresent(v -> assertTrue(v.major() >= 1 && v.major() < 1000, inst + ": " + v));
        }
    }

    @Test
    void symlinkLoopsAndLinksToRoot() throws IOException {
        Path loop = tmp.resolve("cuda-loop");
        Files.createSymbolicLink(loop, loop.getFileName());
        Path ping = tmp.resolve("ping");
        Path pong = tmp.resolve("pong");
        Files.createSymbolicLink(ping, pong.getFileName());
        Files.createSymbolicLink(pong, ping.getFileName());
        Path inner = cudaRoot("cuda-inner-loop");
        Files.createSymbolicLink(inner.resolve("lib64/up"), Path.of(".."));
        Files.createSymbolicLink(inner.resolve("lib64/self"), Path.of("self"));
        Path toRoot = tmp.resolve("cuda-lib-to-root");
        Files.createDirectories(toRoot.resolve("include"));
        Files.createSymbolicLink(toRoot.resolve("lib64"), Path.of("/"));
        Files.createSymbolicLink(toRoot.resolve("lib"), Path.of("/"));
        Path libLoop = tmp.resolve("cuda-lib-loop");
        Files.createDirectories(libLoop);
        Files.createSymbolicLink(libLoop.resolve("lib64"), Path.of("lib64"));
        Path usrLocal = tmp.resolve("fsroot/usr/local");
        Files.createDirectories(usrLocal);
        Files.createSymbolicLink(usrLocal.resolve("cuda"), Path.of("cuda-12.6"));
        Files.createSymbolicLink(usrLocal.resolve("cuda-12.6"), Path.of("cuda"));
        Files.createSymbolicLink(usrLocal.resolve("cuda-13.0"), Path.of("/"));
        discover(loop, ping, inner, toRoot, libLoop);
    }

    @Test
    void runtimeLibraryThatIsADirectoryOrDangling() throws IOException {
        Path a = tmp.resolve("cuda-dir-lib");
        Files.createDirectories(a.resolve("lib64/libcudart.so.12"));
        Files.writeString(a.resolve("version.txt"), "CUDA Version 12.6.77\n");
        Path b = tmp.resolve("cuda-dangling-lib");
        Files.createDirectories(b.resolve("lib64"));
        Files.createSymbolicLink(b.resolve("lib64/libcudart.so.12"), Path.of("libcudart.so.12.6.77"));
        Files.writeString(b.resolve("version.txt"), "CUDA Version 12.6.77\n");
        Path c = tmp.resolve("cuda-weird-soname");
        Files.createDirectories(c.resolve("lib64"));
        Files.createFile(c.resolve("lib64/libcudart.so.99999999999"));
        Files.createFile(c.resolve("lib64/libcudart.so.12.x.y"));
        Files.createFile(c.resolve("lib64/libcudart.so."));
        Discovery r = discover(a, b, c);
        for (CudaInstallation inst : r.installations()) {
            inst.runtimeLibrary().ifPresent(p -> assertTrue(Files.isRegularFile(p),
                    inst + ": its runtime library " + p + " is no file"));
            if (inst.root().equals(a.toRealPath()) || inst.root().equals(b.toRealPath())) {
                assertFalse(inst.hasRuntime(), inst + " has no usable libcudart");
            }
        }
    }

    @Test
    void pipMetadataInWeirdEncodings() throws IOException {
        Path site = tmp.resolve("site-packages");
        Path rt = site.resolve("nvidia/cuda_runtime");
        Files.createDirectories(rt.resolve("lib"));
        Files.createFile(rt.resolve("lib/libcudart.so.12"));
        Path di = site.resolve("nvidia_cuda_runtime_cu12-12.4.127.dist-info");
        Files.createDirectories(di);
        byte[] utf16 = "Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.4.127\n"
                .getBytes(StandardCharsets.UTF_16);
        Files.write(di.resolve("METADATA"), utf16);
        Path di2 = site.resolve("nvidia_cuda_runtime_cu12-\u0661\u0662.4.127.dist-info");
        Files.createDirectories(di2);
        Files.write(di2.resolve("METADATA"), new byte[]{(byte) 0xff, (byte) 0xfe, 'V', 0, (byte) 0x80});
        Path di3 = site.resolve("nvidia_cuda_runtime_cu12-99999999999.0.dist-info");
        Files.createDirectories(di3);
        Files.writeString(di3.resolve("METADATA"), "Version: " + "9".repeat(1_000_000) + "\n");
        Path inside = cudaRoot("cuda-pip-inside");
        Path di4 = inside.resolve("nvidia_cuda_runtime-13.0.48.dist-info");
        Files.createDirectories(di4);
        assumeTrue(mkfifo(di4.resolve("METADATA")), "mkfifo not available");
        discover(rt, site, inside);
    }

    // ---- an extended driver table ----

    @Test
    void compatibilityTableHostileYaml() {
        StringBuilder laughs = new StringBuilder("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for (int i = 1; i < 30; i++) {
            laughs.append("a").append(i).append(": &a").append(i).append(" [");
            for (int j = 0; j < 10; j++) {
                laughs.append(j == 0 ? "" : ", ").append("*a").append(i - 1);
            }
            laughs.append("]\n");
        }
        List<String> docs = List.of(laughs.toString(), "toolkits: {\"12.4\": abc}\n",
                "toolkits: {\"12.4\": \"-1\"}\n", "toolkits: {\"abc\": \"550.54.14\"}\n",
                "toolkits: {\"0.1\": \"550.54.14\"}\n", "toolkits: {\"12.4\": !!java.lang.Object {}}\n",
                "toolkits: {\"12.4\": 550.54}\n", "toolkits: {\"12.4\": [1]}\n", "toolkits: [1, 2]\n",
                "toolkits: {\"12.4\": \"550.54.14\", \"12.4\": \"560.0\"}\n",
                "minor_version_floor: {\"99999999999\": \"1.0\"}\n", "minor_version_floor: {\"x\": \"1.0\"}\n",
                "toolkits: {\"12.4\": \"550.54.14\"}\n---\ntoolkits: {}\n", "[".repeat(100_000),
                "toolkits: !!binary aGVsbG8=\n", "bogus: 1\n", "", "~\n", "\u0000");
        for (String y : docs) {
            String what = y.length() > 40 ? y.substring(0, 40) + "..." : y;
            Object o = outcome(() -> CompatibilityTable.parse(y, "table.yaml"), what);
            if (o instanceof Throwable e) {
                if (e.getClass() != io.gpusched.core.GpuConfigException.class) {
                    throw new AssertionError("table " + what + ": expected GpuConfigException, got " + e, e);
                }
                assertTrue(e.getMessage().contains("table.yaml"), what + ": " + e.getMessage());
            }
        }
    }
}
