package io.gpusched.client.embedder;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.testing.UnixHttpStandIn;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * README's "The node service from Java" program, as pasted: compiled with javac against a class path of
 * gpusched-client, gpu-core and their own dependencies only (no gpusched-server, no Jetty: checked), then run in a
 * child JVM as an ordinary user ({@code nobody}, through {@code setpriv}, when this test runs as root) against a
 * node service stand-in on a Unix socket named by {@code GPUSCHED_SOCKET}: it allocates, reads the environment and
 * releases, and the stand-in saw those three requests.
 */
@Timeout(180)
class EmbedderClassPathTest {
    private static final Pattern ALLOWED = Pattern.compile(
            ".*(/gpusched-client/target/classes|/gpu-core/target/classes|/gpu-core-[^/]*\\.jar|/jackson-[^/]*\\.jar"
                    + "|/slf4j-api-[^/]*\\.jar|/snakeyaml-[^/]*\\.jar)$");

    private Path base;
    private UnixHttpStandIn service;

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    @Test
    void theReadmeProgramCompilesAndTalksToTheServiceWithTheClientAndCoreAlone() throws Exception {
        String readme = Files.readString(Path.of("../README.md"));
        int sec = readme.indexOf("### The node service from Java");
        assertThat(sec).as("README section").isPositive();
        int start = readme.indexOf("```java\n", sec) + "```java\n".length();
        String program = readme.substring(start, readme.indexOf("```", start));
        assertThat(program).contains("public class TrainOnTheNode");

        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-embedder");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        // the embedder's class path: copied where an ordinary user may read it, and nothing of the server's
        List<String> cp = new ArrayList<>();
        int n = 0;
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!ALLOWED.matcher(e).matches()) {
                continue;
            }
            Path src = Path.of(e);
            Path dst = base.resolve("cp" + n++ + (Files.isDirectory(src) ? "" : ".jar"));
            copy(src, dst);
            cp.add(dst.toString());
        }
        assertThat(cp).as("client and core on the class path").hasSizeGreaterThanOrEqualTo(4);
        assertThat(String.join(":", cp)).doesNotContainIgnoringCase("jetty").doesNotContain("gpusched-server");
        Path srcDir = Files.createDirectories(base.resolve("src"));
        Path java = Files.writeString(srcDir.resolve("TrainOnTheNode.java"), program);
        Path classes = Files.createDirectories(base.resolve("classes"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assumeTrue(javac != null, "needs a JDK (javac)");
        int compiled = javac.run(null, null, System.err, "--release", "17", "-classpath", String.join(":", cp),
                "-d", classes.toString(), java.toString());
        assertThat(compiled).as("the README program compiles against gpusched-client and gpu-core alone").isZero();
        openToAll(base);

        ObjectMapper m = new ObjectMapper();
        service = new UnixHttpStandIn(base.resolve("gpusched.sock"), (r, x) -> {
            switch (r.method() + " " + r.target()) {
                case "POST /api/v1/allocations" -> x.json(201, "{\"id\":\"a-7\",\"owner\":\"nobody\",\"ownerUid\":"
                        + "65534,\"jobId\":null,\"devices\":[3],\"uuids\":[\"GPU-3\"],\"sharing\":\"EXCLUSIVE\","
                        + "\"sharedMemoryBytes\":null,\"createdAt\":\"2026-11-22T10:00:00Z\",\"expiresAt\":"
                        + "\"2026-11-22T12:00:00Z\",\"expired\":false,\"holderPid\":null,\"labels\":{},"
                        + "\"placement\":\"proven optimal\"}");
                case "GET /api/v1/allocations/a-7/environment" -> x.json(200, "{\"allocation\":\"a-7\",\"variables\":"
                        + "{\"CUDA_VISIBLE_DEVICES\":\"GPU-3\"},\"pathPrepends\":{},\"notes\":[],\"container\":{}}");
                case "DELETE /api/v1/allocations/a-7" -> x.json(200, "{\"id\":\"a-7\",\"released\":true}");
                default -> x.json(404, "{\"status\":404,\"error\":\"no such resource\"}");
            }
        });
        Files.setPosixFilePermissions(service.socket(), PosixFilePermissions.fromString("rw-rw-rw-"));

        List<String> cmd = new ArrayList<>();
        boolean root = Files.readAllLines(Path.of("/proc/self/status")).stream()
                .anyMatch(l -> l.matches("Uid:\\s+0\\s.*"));
        if (root && Files.isExecutable(Path.of("/usr/bin/setpriv"))) {
            cmd.addAll(List.of("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"));
        }
        cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                classes + ":" + String.join(":", cp), "TrainOnTheNode"));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(base.toFile()).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/bin:/bin");
        pb.environment().put("GPUSCHED_SOCKET", service.socket().toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out.strip()).isEqualTo("a-7 [3] GPU-3");
        assertThat(service.requests()).extracting(r -> r.method() + " " + r.target()).containsExactly(
                "POST /api/v1/allocations", "GET /api/v1/allocations/a-7/environment",
                "DELETE /api/v1/allocations/a-7");
        assertThat(m.readTree(service.requests().get(0).body()).get("flags").toString())
                .isEqualTo("[\"--gpu=1\",\"--lease=2h\"]");
    }

    private static void copy(Path src, Path dst) throws Exception {
        if (!Files.isDirectory(src)) {
            Files.copy(src, dst, StandardCopyOption.COPY_ATTRIBUTES);
            return;
        }
        try (Stream<Path> all = Files.walk(src)) {
            for (Path p : (Iterable<Path>) all::iterator) {
                Path t = dst.resolve(src.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(t);
                } else {
                    Files.copy(p, t);
                }
            }
        }
    }

    private static void openToAll(Path dir) throws Exception {
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) all::iterator) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(Files.isDirectory(p) ? "rwxr-xr-x"
                        : "rw-r--r--"));
            }
        }
    }
}
