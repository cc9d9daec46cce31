package io.gpusched.cli.adversarial.review15;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review15: README's exit-code table now has 126 (COMMAND_NOT_RUNNABLE: found, not executable; "as a shell's 126")
 * and 127 (COMMAND_NOT_FOUND: "as a shell's 127"). These run the same commands that cannot start locally and through a
 * real node service ({@code gpusched serve --socket}, the CLI in process as root) and compare with a shell.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class RunExitCodesLocalAndServiceTest {
    @TempDir
    Path dir;

    record Result(int exit, String out, String err) {
    }

    private static Result gpusched(Path socket, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        env.remove("CONTAINER_ID");
        if (socket != null) {
            env.put("GPUSCHED_SOCKET", socket.toString());
        }
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static int shell(String cmd) throws Exception {
        Process p = new ProcessBuilder("/bin/sh", "-c", "exec \"$@\"", "sh", cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        return p.exitValue();
    }

    /** @return an ELF64 executable header for aarch64 (e_machine 0xB7): ENOEXEC on any other architecture */
    private static byte[] aarch64Elf() {
        ByteBuffer b = ByteBuffer.allocate(128).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[]{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}).put(new byte[8]);
        b.putShort((short) 2).putShort((short) 0xB7).putInt(1).putLong(0x400000L).putLong(64).putLong(0).putInt(0)
                .putShort((short) 64).putShort((short) 56).putShort((short) 0).putShort((short) 0)
                .putShort((short) 0).putShort((short) 0);
        return b.array();
    }

    /**
     * The commands that cannot start: a directory, a missing file, a file without x, a script with no interpreter, and
     * (review16) an executable of another architecture (ENOEXEC: sh and bash exit 126; through the service the job
     * started through {@code env}, whose execvp ran the binary as shell text, 127) and a symbolic link loop (ELOOP:
     * the local run and sh 127; through {@code env} 126).
     */
    private Map<String, String> commands() throws Exception {
        Map<String, String> m = new LinkedHashMap<>();
        Path d = Files.createDirectories(dir.resolve("a-directory"));
        m.put("a directory", d.toString());
        m.put("a missing file", dir.resolve("no-such-command").toString());
        Path plain = Files.writeString(dir.resolve("not-executable.sh"), "#!/bin/sh\necho hi\n");
        Files.setPosixFilePermissions(plain, PosixFilePermissions.fromString("rw-r--r--"));
        m.put("a file without x", plain.toString());
        Path bad = Files.writeString(dir.resolve("bad-interpreter.sh"), "#!/no/such/interpreter\necho hi\n");
        Files.setPosixFilePermissions(bad, PosixFilePermissions.fromString("rwxr-xr-x"));
        m.put("a script whose interpreter is missing", bad.toString());
        if (!System.getProperty("os.arch").equals("aarch64")) {
            Path elf = Files.write(dir.resolve("arm64-binary"), aarch64Elf());
            Files.setPosixFilePermissions(elf, PosixFilePermissions.fromString("rwxr-xr-x"));
            m.put("an aarch64 executable", elf.toString());
        }
        Path loop1 = dir.resolve("loop1");
        if (!Files.exists(loop1, LinkOption.NOFOLLOW_LINKS)) {
            Files.createSymbolicLink(loop1, dir.resolve("loop2"));
            Files.createSymbolicLink(dir.resolve("loop2"), loop1);
        }
        m.put("a symbolic link loop", loop1.toString());
        return m;
    }

    /**
     * README: 126 "the command was found but cannot be run (not executable) ... (as a shell's 126)"; 127 "the command
     * was not found ... (as a shell's 127)". A directory is found and cannot be run: sh, bash and env all exit 126
     * ("Permission denied" / "Is a directory"). The local run says "no such file" and exits 127: RunCommand.found
     * (RunCommand.java:247) counts only regular files as found.
     */
    @Test
    void aLocalRunOfEachCommandThatCannotStartExitsAsAShellDoes() throws Exception {
        SoftAssertions soft = new SoftAssertions();
        for (Map.Entry<String, String> e : commands().entrySet()) {
            int sh = shell(e.getValue());
            Result r = gpusched(null, "--simulate", "dgx1-v100", "--state-dir", dir.resolve("state").toString(),
                    "run", "--no-isolation", "--gpu=1", "--", e.getValue());
            soft.assertThat(r.exit()).as("local `gpusched run -- <%s>` (sh exits %d): %s", e.getKey(), sh,
                    r.err().strip()).isEqualTo(sh);
        }
        soft.assertAll();
    }

    /**
     * The same commands through a real node service (root's run, jobs on): the exit code should be the local run's
     * for each (README: one table for every entry point; through the service only 125 is added).
     */
    @Test
    void aRunThroughTheNodeServiceExitsAsTheSameLocalRun() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        if (!Files.isRegularFile(v2.resolve("cgroup.procs"))) {
            v2 = Path.of("/sys/fs/cgroup");
        }
        assumeTrue(Files.isRegularFile(v2.resolve("cgroup.procs")) && Files.readString(Path.of("/proc/mounts"))
                .contains(" " + v2 + " cgroup2 "), "needs cgroup2");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-r15-");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        Path socket = base.resolve("run").resolve("gpusched.sock");
        Path jobParent = v2.resolve("r15-jobs-" + UUID.randomUUID().toString().substring(0, 8));
        Path config = base.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  service:\n    job_cgroup_parent: " + jobParent + "\n    kill_grace: 1s\n");
        Path log = base.resolve("serve.log");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-cp",
                System.getProperty("java.class.path"), GpuschedCommand.class.getName(), "--simulate",
                "dgx1-v100", "--state-dir", base.resolve("state").toString(), "--config", config.toString(), "serve",
                "--listen", "127.0.0.1:0", "--socket", socket.toString()));
        Process service = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            for (int i = 0; i < 900 && !Files.readString(log).contains("gpusched node service on")
                    && service.isAlive(); i++) {
                Thread.sleep(100);
            }
            assertThat(Files.readString(log)).as("the service's start").contains("gpusched node service on")
                    .doesNotContain("jobs are off");
            Result ok = gpusched(socket, "run", "--gpu=1", "--", "/bin/sh", "-c", "exit 7");
            assertThat(ok.exit()).as("a job that runs, through the service: " + ok.err()).isEqualTo(7);
            SoftAssertions soft = new SoftAssertions();
            for (Map.Entry<String, String> e : commands().entrySet()) {
                Result local = gpusched(null, "--simulate", "dgx1-v100", "--state-dir", dir.resolve("state")
                        .toString(), "run", "--no-isolation", "--gpu=1", "--", e.getValue());
                Result remote = gpusched(socket, "run", "--gpu=1", "--", e.getValue());
                System.out.printf("review15 %s: local %d (%s), service %d (%s)%n", e.getKey(), local.exit(),
                        local.err().strip(), remote.exit(), remote.err().strip());
                soft.assertThat(remote.exit()).as("`gpusched run -- <%s>` through the service (%s); locally %d (%s)",
                        e.getKey(), remote.err().strip(), local.exit(), local.err().strip()).isEqualTo(local.exit());
            }
            soft.assertAll();
        } finally {
            service.destroy();
            if (!service.waitFor(60, TimeUnit.SECONDS)) {
                service.destroyForcibly().waitFor();
            }
            if (Files.isDirectory(jobParent)) {
                try (var s = Files.list(jobParent)) {
                    for (Path c : s.filter(Files::isDirectory).toList()) {
                        Files.writeString(c.resolve("cgroup.kill"), "1");
                        Thread.sleep(100);
                        Files.deleteIfExists(c);
                    }
                }
                Files.deleteIfExists(jobParent);
            }
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }
}
