package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Real processes in real cgroups laid out as Slurm's plugins lay them out, read back through the kernel's own
 * {@code /proc/<pid>/cgroup} (as root, where the hierarchies are mounted): a v1 freezer hierarchy
 * {@code /slurm_<unique>/uid_1000/job_<id>/step_0} and a v2 {@code /<unique>_slurmstepd.scope/job_<id>/step_batch}
 * (unique names, so other tests on the machine and a real Slurm are never touched; removed afterwards). Also checks
 * the assumption the parser's forged-line defence rests on: the kernel refuses a cgroup name with a newline.
 */
@Tag("cgroup")
class SlurmRealCgroupTest {
    private final List<Path> made = new ArrayList<>();
    private final List<Process> children = new ArrayList<>();
    private final String unique = "gst" + UUID.randomUUID().toString().substring(0, 8);

    static Optional<Path> mount(String type, String option) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] halves = line.split(" - ", 2);
            if (halves.length < 2) {
                continue;
            }
            String[] left = halves[0].split(" ");
            String[] right = halves[1].split(" ");
            if (right[0].equals(type) && (option == null || List.of(right[right.length - 1].split(","))
                    .contains(option))) {
                return Optional.of(Path.of(left[4]));
            }
        }
        return Optional.empty();
    }

    static void assumeRoot() throws IOException {
        assumeTrue((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid") == 0, "cgroups need root");
    }

    private Path make(Path root, String relative) throws IOException {
        Path p = root;
        for (String part : relative.split("/")) {
            p = p.resolve(part);
            if (!Files.isDirectory(p)) {
                Files.createDirectory(p);
                made.add(p);
            }
        }
        return p;
    }

    private long startIn(Path cgroup) throws IOException {
        Process p = new ProcessBuilder("sleep", "60").start();
        children.add(p);
        Files.writeString(cgroup.resolve("cgroup.procs"), Long.toString(p.pid()));
        return p.pid();
    }

    @AfterEach
    void cleanUp() throws Exception {
        for (Process p : children) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
        for (int i = made.size() - 1; i >= 0; i--) {
            for (int tries = 0; tries < 50 && Files.exists(made.get(i)); tries++) {
                try {
                    Files.delete(made.get(i)); // rmdir of a cgroup: fails while a dying process is still in it
                } catch (IOException e) {
                    Thread.sleep(100);
                }
            }
        }
    }

    @Test
    void v1FreezerJobStepOfARealProcess() throws Exception {
        assumeRoot();
        Optional<Path> freezer = mount("cgroup", "freezer");
        assumeTrue(freezer.isPresent(), "no cgroup v1 freezer hierarchy mounted here");
        Path step = make(freezer.get(), "slurm_" + unique + "/uid_1000/job_4242/step_0");
        long pid = startIn(step);
        assertThat(SlurmJobAttribution.host().jobOf((int) pid)).hasValue(new SlurmJobStep(4242, Optional.of("0"),
                OptionalLong.of(1000), 1));
    }

    @Test
    void v2ScopeJobStepOfARealProcess() throws Exception {
        assumeRoot();
        Optional<Path> unified = mount("cgroup2", null);
        assumeTrue(unified.isPresent(), "no cgroup v2 hierarchy mounted here");
        Path step = make(unified.get(), unique + "_slurmstepd.scope/job_4343/step_batch");
        long pid;
        try {
            pid = startIn(step);
        } catch (IOException e) {
            assumeTrue(false, "cannot move a process in the v2 hierarchy here: " + e.getMessage());
            return;
        }
        String cgroupFile = Files.readString(Path.of("/proc/" + pid + "/cgroup"));
        assertThat(SlurmJobAttribution.host().jobOf((int) pid)).as(cgroupFile).hasValue(new SlurmJobStep(4343,
                Optional.of("batch"), OptionalLong.empty(), 2));
    }

    @Test
    void theKernelRefusesACgroupNameWithANewline() throws Exception {
        assumeRoot();
        Optional<Path> root = mount("cgroup2", null).or(() -> {
            try {
                return mount("cgroup", "freezer");
            } catch (IOException e) {
                return Optional.empty();
            }
        });
        assumeTrue(root.isPresent(), "no cgroup hierarchy mounted here");
        Path forged = root.get().resolve(unique + "\n0::");
        assertThatThrownBy(() -> {
            Files.createDirectory(forged);
            made.add(forged);
        }).isInstanceOf(IOException.class);
    }
}
