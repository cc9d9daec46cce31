package io.gpusched.cli.adversarial.review16;

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
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: README's exit codes, "The same error exits with the same code from every entry point"; 126 "the command
 * was found but cannot be run", 127 "not found ... (as a shell's 127)". Two commands review15 did not try, run
 * locally and through a real node service ({@code gpusched serve --socket}, root's runs):
 * <ul>
 *   <li>an executable of another architecture (an aarch64 ELF here; execve: ENOEXEC). sh, bash and the local run
 *   exit 126 ("Exec format error"). Through the service 127, and the binary is read by /bin/sh as a shell script
 *   ("./arm64-binary: 1: ELF...: not found"): the job starts through {@code /usr/bin/env} (JobLauncher.java:73), whose
 *   execvp falls back to {@code /bin/sh FILE} on ENOEXEC, so a wrong-architecture or corrupt binary is run as shell
 *   text, as the job's user.</li>
 *   <li>a symbolic link loop (ELOOP): the local run 127 ("no such file", as sh/dash), through the service 126 (env's
 *   "Too many levels of symbolic links").</li>
 * </ul>
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class RunExitCodesOfUnrunnableFilesTest {
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

    /** @return an ELF64 executable header for aarch64 (e_machine 0xB7): ENOEXEC on any other architecture */
    private static byte[] aarch64Elf() {
        ByteBuffer b = ByteBuffer.allocate(128).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[]{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}).put(new byte[8]);
        b.putShort((short) 2).putShort((short) 0xB7).putInt(1).putLong(0x400000L).putLong(64).putLong(0).putInt(0)
                .putShort((short) 64).putShort((short) 56).putShort((short) 0).putShort((short) 0)
                .putShort((short) 0).putShort((short) 0);
        return b.array();
    }

    @Test
    void aForeignBinaryAndASymlinkLoopExitAlikeLocallyAndThroughTheService() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        assumeTrue(!System.getProperty("os.arch").equals("aarch64"), "the foreign binary is aarch64's");
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        if (!Files.isRegularFile(v2.resolve("cgroup.procs"))) {
            v2 = Path.of("/sys/fs/cgroup");
        }
        assumeTrue(Files.isRegularFile(v2.resolve("cgroup.procs")) && Files.readString(Path.of("/proc/mounts"))
                .contains(" " + v2 + " cgroup2 "), "needs cgroup2");
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-r16-");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        Map<String, String> commands = new LinkedHashMap<>();
        Path elf = Files.write(base.resolve("arm64-binary"), aarch64Elf());
        Files.setPosixFilePermissions(elf, PosixFilePermissions.fromString("rwxr-xr-x"));
        commands.put("an aarch64 executable", elf.toString());
        Path loop1 = base.resolve("loop1");
        Files.createSymbolicLink(loop1, base.resolve("loop2"));
        Files.createSymbolicLink(base.resolve("loop2"), loop1);
        commands.put("a symbolic link loop", loop1.toString());

        Path socket = base.resolve("run").resolve("gpusched.sock");
        Path jobParent = v2.resolve("r16-jobs-" + UUID.randomUUID().toString().substring(0, 8));
        Path config = base.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  service:\n    job_cgroup_parent: " + jobParent + "\n    kill_grace: 1s\n");
        Path log = base.resolve("serve.log");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), GpuschedCommand.class.getName(), "--simulate",
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
            List<String> differ = new ArrayList<>();
            for (Map.Entry<String, String> e : commands.entrySet()) {
                Result local = gpusched(null, "--simulate", "dgx1-v100", "--state-dir", dir.resolve("state")
                        .toString(), "run", "--no-isolation", "--gpu=1", "--", e.getValue());
                Result remote = gpusched(socket, "run", "--gpu=1", "--", e.getValue());
                if (remote.exit() != local.exit()) {
                    differ.add(e.getKey() + ": locally " + local.exit() + " (" + local.err().strip().replace('\n', ' ')
                            + "), through the service " + remote.exit() + " (" + (remote.out() + remote.err()).strip()
                                    .replace('\n', ' ')
                            + ")");
                }
            }
            assertThat(differ).as("`gpusched run` of files that cannot run, local run against the node service")
                    .isEmpty();
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
