package io.gpusched.flink.standalone;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;

/**
 * The job {@link FlinkStandaloneIT} submits with Flink's command line ({@code flink run}, a client JVM of its own):
 * four subtasks of an operator, spread over the session cluster's slots, each report from inside its TaskManager the
 * subtask index, the TaskManager's pid and the UUIDs of {@code getRuntimeContext().getExternalResourceInfos("gpu")};
 * the client collects the reports and prints one {@code OPERATOR subtask pid uuid,uuid,...} line per subtask.
 */
public final class StandaloneGpuJob {
    private StandaloneGpuJob() {
    }

    /** Reports the GPUs of the TaskManager the subtask runs in. */
    static final class Report extends RichMapFunction<Long, String> {
        private static final long serialVersionUID = 1L;

        @Override
        public String map(Long v) {
            TreeSet<String> uuids = new TreeSet<>();
            for (ExternalResourceInfo i : getRuntimeContext().getExternalResourceInfos("gpu")) {
                uuids.add(i.getProperty("uuid").orElse("?"));
            }
            return "OPERATOR " + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() + " "
                    + ProcessHandle.current().pid() + " " + String.join(",", uuids);
        }
    }

    /** @param args unused */
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        // 4 subtasks on 2 TaskManagers of 2 slots: every slot, so both TaskManagers, run one; rebalance feeds each
        List<String> seen = new ArrayList<>();
        try (CloseableIterator<String> it = env.fromSequence(1, 16).setParallelism(1).rebalance()
                .map(new Report()).setParallelism(4).executeAndCollect("gpusched-standalone-it")) {
            it.forEachRemaining(seen::add);
        }
        new TreeSet<>(seen).forEach(System.out::println);
        System.out.flush();
    }
}
