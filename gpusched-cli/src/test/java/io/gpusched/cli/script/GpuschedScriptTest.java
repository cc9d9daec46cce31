package io.gpusched.cli.script;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The repository's {@code ./gpusched} script says what its first build does (a line per module as Maven starts it)
 * and, when the build fails, shows the end of the build's log; it runs the jar after. Tried on a copy of the script
 * with a stand-in {@code mvnw} (printing Maven's own "Building" lines) and a stand-in {@code java}, so no real build
 * runs here.
 */
class GpuschedScriptTest {

    record Result(int exit, String out, String err) {
    }

    private static Path tree(Path dir, String mvnwBody) throws Exception {
        Path repo = Files.createDirectories(dir.resolve("repo"));
        Files.copy(Path.of("..", "gpusched"), repo.resolve("gpusched"));
        Path mvnw = repo.resolve("mvnw");
        Files.writeString(mvnw, "#!/usr/bin/env bash\n" + mvnwBody);
        Path bin = Files.createDirectories(dir.resolve("bin"));
        Files.writeString(bin.resolve("java"), "#!/usr/bin/env bash\necho \"java $*\"\n");
        for (Path p : new Path[]{mvnw, bin.resolve("java"), repo.resolve("gpusched")}) {
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        Path src = Files.createDirectories(repo.resolve("gpusched-cli/src/main/java"));
        Files.writeString(src.resolve("A.java"), "class A {}\n");
        return repo;
    }

    private static Result run(Path dir, Path repo, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(repo.resolve("gpusched").toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        Map<String, String> env = pb.environment();
        env.put("PATH", dir.resolve("bin") + ":" + env.getOrDefault("PATH", "/usr/bin:/bin"));
        env.put("TMPDIR", Files.createDirectories(dir.resolve("tmp")).toString());
        Process p = pb.start();
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        byte[] err = p.getErrorStream().readAllBytes();
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8),
                new String(err, StandardCharsets.UTF_8));
    }

    private static final String BUILDS = """
            echo '[INFO] Scanning for projects...'
            echo '[INFO] ------------------------< io.gpusched:gpu-core >------------------------'
            echo '[INFO] Building gpusched :: core 0.1.0-SNAPSHOT                                [1/2]'
            echo '[INFO]   from gpu-core/pom.xml'
            echo '[INFO] Building gpusched :: cli 0.1.0-SNAPSHOT                                 [2/2]'
            mkdir -p gpusched-cli/target && touch gpusched-cli/target/gpusched.jar
            echo '[INFO] BUILD SUCCESS'
            """;

    @Test
    void theFirstBuildSaysWhatItDoesThenRuns(@TempDir Path dir) throws Exception {
        Path repo = tree(dir, BUILDS);
        Result r = run(dir, repo, "--version");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.err()).contains("gpusched: first use: building").contains("gpusched:   [1/2] gpusched :: core")
                .contains("gpusched:   [2/2] gpusched :: cli").contains("gpusched: built ")
                .doesNotContain("Scanning for projects");
        assertThat(r.out()).isEqualTo("java -XX:-UsePerfData -jar " + repo.resolve("gpusched-cli/target/gpusched.jar")
                + " --version\n");
        try (var logs = Files.list(dir.resolve("tmp"))) {
            assertThat(logs).as("the log of a good build is not kept").isEmpty();
        }
        // built and fresh: no build, no line
        Files.setLastModifiedTime(repo.resolve("gpusched-cli/target/gpusched.jar"),
                FileTime.from(Instant.now().plusSeconds(60)));
        Result again = run(dir, repo, "list");
        assertThat(again.err()).isEmpty();
        assertThat(again.out()).endsWith("-jar " + repo.resolve("gpusched-cli/target/gpusched.jar") + " list\n");
    }

    @Test
    void aFailedBuildShowsTheEndOfItsLog(@TempDir Path dir) throws Exception {
        Path repo = tree(dir, "echo '[INFO] Building gpusched :: core 0.1.0-SNAPSHOT   [1/2]'\n"
                + "echo '[ERROR] COMPILATION ERROR: A.java:[1,9] boom'\nexit 1\n");
        Result r = run(dir, repo, "--version");
        assertThat(r.exit()).isEqualTo(1);
        assertThat(r.err()).contains("[1/2] gpusched :: core").contains("the build failed")
                .contains("[ERROR] COMPILATION ERROR: A.java:[1,9] boom");
        assertThat(r.out()).as("the jar is not run").isEmpty();
    }
}
