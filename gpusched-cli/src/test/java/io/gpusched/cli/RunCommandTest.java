package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.internal.Libc;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** gpusched run end to end: a real child process, fenced in a real cgroup, with its GPU environment. */
@Tag("cgroup")
class RunCommandTest {

    @Test
    void theChildSeesItsEnvironmentIsFencedAndNothingIsLeftBehind(@TempDir Path dir) throws Exception {
        Libc libc = Libc.Holder.get();
        assumeTrue(libc != null && libc.geteuid() == 0, "skipped: needs root");
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.detect(GpuInventories.simulated("dgx1-v100").devices());
        assumeTrue(iso.isAvailable(), () -> "skipped: " + iso.unavailabilityCause().get());
        for (int i = 0; i < 3; i++) {
            libc.mknod(dir.resolve("nvidia" + i).toString(), Libc.S_IFCHR | 0666, Libc.makedev(195, i));
        }
        String uuid1 = GpuInventories.simulated("dgx1-v100").devices().get(1).uuid();
        CliRunner cli = new CliRunner(dir.resolve("state"));
        String probe = "echo CVD=$CUDA_VISIBLE_DEVICES; echo NVD=$NVIDIA_VISIBLE_DEVICES; "
                + "for f in " + dir + "/nvidia0 " + dir + "/nvidia1 " + dir + "/nvidia2 /dev/null; do "
                + "if err=$(dd if=$f of=/dev/null count=0 2>&1); then echo \"$f OK\"; else echo \"$f ${err##*: }\"; fi;"
                + " done; exit 7";
        CliRunner.Result r = cli.run("--simulate", "dgx1-v100", "run", "--devices=1", "--", "sh", "-c", probe);
        assertThat(r.exit()).as(r.out() + r.err()).isEqualTo(7);
        assertThat(r.out()).contains("CVD=" + uuid1).contains("NVD=" + uuid1)
                .contains(dir + "/nvidia1 No such device or address")
                .contains(dir + "/nvidia0 Operation not permitted")
                .contains(dir + "/nvidia2 Operation not permitted")
                .contains("/dev/null OK");
        Matcher fenced = Pattern.compile("fenced in (\\S+)").matcher(r.err());
        assertThat(fenced.find()).as(r.err()).isTrue();
        assertThat(cli.run("--simulate", "dgx1-v100", "status", "--json").out()).contains("\"allocations\" : [ ]");
        // the default parent is the host's, shared with every other run on it (other tests' too, in any order):
        // what this run must leave behind is nothing of its own, its job cgroup named in "fenced in"
        Path job = Path.of(fenced.group(1));
        String name = job.getFileName().toString();
        assertThat(name).as(r.err()).matches("job-\\S+-\\d+");
        assertThat(job).as("the run's job cgroup").doesNotExist();
        String ofThisNode = name.substring(0, name.lastIndexOf('-') + 1); // job-<this state directory's node>-
        try (Stream<Path> jobs = Files.list(job.getParent())) {
            assertThat(jobs.filter(p -> p.getFileName().toString().startsWith(ofThisNode))).as("job cgroups")
                    .isEmpty();
        }
    }

    @Test
    void withoutIsolationTheJobRunsUnfencedOnlyWhenAsked(@TempDir Path dir) {
        CliRunner cli = new CliRunner(dir.resolve("state"));
        CliRunner.Result r = cli.run("--simulate", "pcie-4xa10", "run", "--no-isolation", "--gpu=2", "--", "sh", "-c",
                "echo CVD=$CUDA_VISIBLE_DEVICES; exit 3");
        assertThat(r.exit()).isEqualTo(3);
        assertThat(r.out()).containsPattern("CVD=GPU-[0-9a-f-]+,GPU-[0-9a-f-]+");
        assertThat(r.err()).contains("isolation is off (--no-isolation)");
        assertThat(cli.run("--simulate", "pcie-4xa10", "status").out()).contains("0 allocations");
        CliRunner.Result missing = cli.run("--simulate", "pcie-4xa10", "run", "--no-isolation", "--",
                "/nonexistent/cmd");
        assertThat(missing.exit()).isEqualTo(127);
        assertThat(missing.err()).contains("cannot start /nonexistent/cmd");
        assertThat(cli.run("--simulate", "pcie-4xa10", "status").out()).contains("0 allocations");
    }
}
