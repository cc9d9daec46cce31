package io.gpusched.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cuda.CudaDeviceQuery.Result;
import io.gpusched.cuda.CudaDeviceQuery.Status;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The driver-API device query against a fake {@code libcuda.so.1} compiled here with gcc (from
 * {@code native/fake_libcuda.c}, written against the documented signatures: no cuda.h is packaged for Debian): the
 * devices it answers, in the order {@code CUDA_VISIBLE_DEVICES} gives, a failing cuInit named, a crash in the library
 * kept in the child, and no library at all. Each case starts one child JVM.
 */
class CudaDeviceQueryTest {
    private static final String A = "GPU-0a1b2c3d-0001-4e5f-8a9b-00000000000a";
    private static final String B = "GPU-0a1b2c3d-0002-4e5f-8a9b-00000000000b";
    private static final String C = "GPU-0a1b2c3d-0003-4e5f-8a9b-00000000000c";
    private static final Duration BOUND = Duration.ofSeconds(120);

    @TempDir
    Path tmp;

    static Path gcc() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
            Path p = Path.of(dir, "gcc");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }

    /** Compiles the fake into {@code dir/libcuda.so.1} with these devices and extra macros. */
    static Path fake(Path dir, List<String> uuids, String... defines) throws IOException, InterruptedException {
        assumeTrue(gcc() != null, "gcc is not on the PATH: the fake libcuda cannot be built");
        Files.createDirectories(dir);
        Path src = dir.resolve("fake_libcuda.c");
        try (InputStream in = CudaDeviceQueryTest.class.getResourceAsStream("/native/fake_libcuda.c")) {
            Files.copy(in, src, StandardCopyOption.REPLACE_EXISTING);
        }
        Path out = dir.resolve("libcuda.so.1");
        String hex = String.join(",", uuids.stream().map(u -> u.substring(4).replace("-", "")).toList());
        List<String> cmd = new ArrayList<>(List.of(gcc().toString(), "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-O2",
                "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-DFAKE_UUIDS=\"" + hex + "\""));
        for (String d : defines) {
            cmd.add("-D" + d);
        }
        cmd.addAll(List.of("-o", out.toString(), src.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("gcc failed for the fake libcuda: " + log);
        }
        return out;
    }

    @Test
    void answersTheDevicesOfCudaVisibleDevicesInItsOrder() throws Exception {
        Path lib = fake(tmp.resolve("three"), List.of(A, B, C));
        Result r = CudaDeviceQuery.run(lib.toString(), List.of(C, A), BOUND);
        assertThat(r.status()).as(r.toString()).isEqualTo(Status.ANSWERED);
        // the child saw CUDA_VISIBLE_DEVICES=C,A: two devices, in that order, not the library's three
        assertThat(r.uuids()).containsExactly(C, A);
        assertThat(r.message()).isEmpty();
    }

    @Test
    void aDeviceTheDriverDoesNotHaveEndsTheListAsCudaDoes() throws Exception {
        Path lib = fake(tmp.resolve("two"), List.of(A, B));
        Result r = CudaDeviceQuery.run(lib.toString(), List.of(A, C, B), BOUND);
        assertThat(r.status()).as(r.toString()).isEqualTo(Status.ANSWERED);
        assertThat(r.uuids()).containsExactly(A);
    }

    @Test
    void aFailingCuInitIsNamed() throws Exception {
        Path lib = fake(tmp.resolve("nodev"), List.of(A), "FAKE_INIT_RESULT=100");
        Result r = CudaDeviceQuery.run(lib.toString(), List.of(A), BOUND);
        assertThat(r.status()).isEqualTo(Status.FAILED);
        assertThat(r.message()).isEqualTo("cuInit returned 100 (CUDA_ERROR_NO_DEVICE)");
    }

    @Test
    void aCrashInTheLibraryStaysInTheChild() throws Exception {
        Path lib = fake(tmp.resolve("crash"), List.of(A), "FAKE_CRASH");
        Result r = CudaDeviceQuery.run(lib.toString(), List.of(A), BOUND);
        assertThat(r.status()).isEqualTo(Status.FAILED);
        assertThat(r.message()).contains("exited").contains("0 of 1 UUIDs");
    }

    @Test
    void noLibraryIsNoDriver() {
        Result r = CudaDeviceQuery.run(tmp.resolve("absent/libcuda.so.1").toString(), List.of(A), BOUND);
        assertThat(r.status()).as(r.toString()).isEqualTo(Status.NO_DRIVER);
        assertThat(r.message()).isNotBlank();
    }

    @Test
    void outputThatDoesNotAddUpFails() {
        assertThat(CudaDeviceQuery.parse("count 2\nuuid " + A + "\n", 0).status()).isEqualTo(Status.FAILED);
        assertThat(CudaDeviceQuery.parse("count x\n", 0).status()).isEqualTo(Status.FAILED);
        assertThat(CudaDeviceQuery.parse("", 0).status()).isEqualTo(Status.FAILED);
        assertThat(CudaDeviceQuery.parse("count 1\nuuid " + A + "\n", 134).status()).isEqualTo(Status.FAILED);
        assertThat(CudaDeviceQuery.parse("count 1\nuuid " + A + "\n", 0).uuids()).containsExactly(A);
        assertThat(CudaDeviceQuery.parse("count 0\n", 0).status()).isEqualTo(Status.ANSWERED);
    }

    /** A stand-in for the query process: a shell script, its stderr sent nowhere as the query's is. */
    private static ProcessBuilder script(String sh) {
        return new ProcessBuilder("/bin/sh", "-c", sh).redirectError(ProcessBuilder.Redirect.DISCARD);
    }

    @Test
    void aChildPrintingAMebibyteBeforeItsAnswerIsReadWhileItRuns() {
        // 1 MiB of driver chatter (16x a pipe's 64 KiB): in lines, and as one line without an end, then the answer;
        // read only after the child's exit, the child blocked on the full pipe and the query timed out
        Result r = CudaDeviceQuery.query(script("i=0; while [ $i -lt 8192 ]; do"
                + " echo 'libcuda: some chatter of the driver, sixty-four bytes a line .........'; i=$((i+1)); done;"
                + " head -c 524288 /dev/zero | tr '\\0' x; echo; echo 'count 1'; echo 'uuid " + A + "'"),
                Duration.ofSeconds(60));
        assertThat(r.status()).as(r.toString()).isEqualTo(Status.ANSWERED);
        assertThat(r.uuids()).containsExactly(A);
    }

    @Test
    void aChildPrintingForeverEndsByTheTimeoutWithBoundedOutputKept() {
        // protocol-looking lines forever: they are kept up to the cap, the rest read and discarded until the timeout
        Result r = CudaDeviceQuery.query(script("yes 'uuid " + A + "'"), Duration.ofSeconds(3));
        assertThat(r.status()).isEqualTo(Status.FAILED);
        assertThat(r.message()).startsWith("the CUDA driver did not answer within 3 s (the query process was killed)")
                .contains("bytes of other output were discarded");
    }

    @Test
    void theOutputKeptIsBoundedWhateverTheChildPrints() {
        CudaDeviceQuery.OutputLines lines = new CudaDeviceQuery.OutputLines(InputStream.nullInputStream());
        byte[] uuidLines = ("uuid " + A + "\n").repeat(1000).getBytes(StandardCharsets.UTF_8);
        byte[] longLine = "count 1".concat("0".repeat(10_000)).getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < 2000; i++) { // 90 MB of lines that look like answers, and lines over the line limit
            lines.accept(uuidLines, uuidLines.length);
            lines.accept(longLine, longLine.length);
            lines.accept(new byte[]{'\n'}, 1);
        }
        assertThat(lines.kept().length()).isLessThanOrEqualTo(CudaDeviceQuery.MAX_OUTPUT);
        assertThat(lines.kept()).doesNotContain("count 1");
        assertThat(lines.discarded()).isGreaterThan(80_000_000L);
    }
}
