package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The one state-directory rule every host uses. */
class StateDirectoryTest {

    @Test
    void baseFollowsEnvironmentThenUser() {
        Path home = Path.of("/home/u");
        assertThat(StateDirectory.base(Map.of("GPUSCHED_STATE_DIR", "/srv/g"), false, home))
                .isEqualTo(Path.of("/srv/g"));
        assertThat(StateDirectory.base(Map.of("GPUSCHED_STATE_DIR", "/srv/g"), true, home))
                .isEqualTo(Path.of("/srv/g"));
        assertThat(StateDirectory.base(Map.of("GPUSCHED_STATE_DIR", " "), true, home))
                .isEqualTo(Path.of("/var/lib/gpusched"));
        assertThat(StateDirectory.base(Map.of(), true, home)).isEqualTo(Path.of("/var/lib/gpusched"));
        assertThat(StateDirectory.base(Map.of("XDG_STATE_HOME", "/x"), false, home)).isEqualTo(Path.of("/x/gpusched"));
        assertThat(StateDirectory.base(Map.of("XDG_STATE_HOME", "rel"), false, home))
                .isEqualTo(Path.of("/home/u/.local/state/gpusched"));
        assertThat(StateDirectory.base(Map.of(), false, home)).isEqualTo(Path.of("/home/u/.local/state/gpusched"));
    }

    @Test
    void realNodesUseTheBaseSimulatedOnesASubdirectoryAndAGivenDirectoryWins() {
        Path base = Path.of("/var/lib/gpusched");
        assertThat(StateDirectory.forNode(Optional.empty(), "nvml", base)).isEqualTo(base);
        assertThat(StateDirectory.forNode(Optional.empty(), "amd-sysfs", base)).isEqualTo(base);
        assertThat(StateDirectory.forNode(Optional.empty(), "simulated:dgx1-v100", base))
                .isEqualTo(base.resolve("simulated/dgx1-v100"));
        Path fromFile = StateDirectory.forNode(Optional.empty(), "simulated:/etc/gpusched/My Node.yaml", base);
        assertThat(fromFile.getParent()).isEqualTo(base.resolve("simulated"));
        assertThat(fromFile.getFileName().toString()).matches("my_node-[0-9a-f]{8}");
        assertThat(StateDirectory.forNode(Optional.empty(), "simulated:/other/My Node.yaml", base))
                .as("another file of the same name is another node").isNotEqualTo(fromFile);
        assertThat(StateDirectory.forNode(Optional.of(Path.of("/d/./x")), "simulated:dgx1-v100", base))
                .isEqualTo(Path.of("/d/x"));
    }
}
