package io.gpusched.flink;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Iterator;
import java.util.List;
import java.util.ServiceLoader;
import java.util.UUID;
import org.apache.flink.api.common.externalresource.ExternalResourceDriverFactory;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.plugin.PluginManager;
import org.apache.flink.runtime.blob.BlobCacheService;
import org.apache.flink.runtime.clusterframework.types.ResourceID;
import org.apache.flink.runtime.entrypoint.WorkingDirectory;
import org.apache.flink.runtime.externalresource.ExternalResourceInfoProvider;
import org.apache.flink.runtime.externalresource.ExternalResourceUtils;
import org.apache.flink.runtime.heartbeat.HeartbeatServices;
import org.apache.flink.runtime.metrics.MetricRegistry;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.rpc.FatalErrorHandler;
import org.apache.flink.runtime.rpc.RpcService;
import org.apache.flink.runtime.security.token.DelegationTokenReceiverRepository;
import org.apache.flink.runtime.taskexecutor.TaskExecutor;
import org.apache.flink.runtime.taskexecutor.TaskManagerRunner;

/**
 * Flink's {@link MiniCluster} with one change: its TaskManagers get the external resources of the configuration, made
 * by {@link ExternalResourceUtils#createStaticExternalResourceInfoProviderFromConfig} exactly as
 * {@code TaskManagerRunner} does in a real TaskManager process (MiniCluster itself passes
 * {@code ExternalResourceInfoProvider.NO_EXTERNAL_RESOURCES}). Drivers are found through a plugin manager that reads
 * {@code META-INF/services} from the class path, which is how our service file is exercised. The rest of
 * {@link #startTaskManager()} repeats MiniCluster's own, reading its private fields.
 */
public class GpuMiniCluster extends MiniCluster {

    /**
     * Finds external resource driver factories on the class path (a Flink distribution finds them in
     * {@code plugins/}); no other plugins (Flink loads e.g. delegation token providers from the class path itself).
     */
    public static final PluginManager CLASSPATH_PLUGINS = new PluginManager() {
        @Override
        public <P> Iterator<P> load(Class<P> service) {
            if (!service.equals(ExternalResourceDriverFactory.class)) {
                return java.util.Collections.emptyIterator();
            }
            return ServiceLoader.load(service, GpuMiniCluster.class.getClassLoader()).iterator();
        }
    };

    /** @param c the cluster's configuration; give it {@link #CLASSPATH_PLUGINS} as plugin manager */
    public GpuMiniCluster(MiniClusterConfiguration c) {
        super(c);
    }

    @Override
    public void startTaskManager() throws Exception {
        synchronized (field("lock")) {
            MiniClusterConfiguration mcc = field("miniClusterConfiguration");
            Configuration conf = mcc.getConfiguration();
            List<TaskExecutor> tms = field("taskManagers");
            ExternalResourceInfoProvider resources = ExternalResourceUtils
                    .createStaticExternalResourceInfoProviderFromConfig(conf, mcc.getPluginManager());
            Object rpcFactory = field("taskManagerRpcServiceFactory");
            Method create = MiniCluster.RpcServiceFactory.class.getMethod("createRpcService");
            RpcService rpc = (RpcService) create.invoke(rpcFactory);
            Object fatal = field("taskManagerTerminatingFatalErrorHandlerFactory");
            Method mk = fatal.getClass().getDeclaredMethod("create", int.class);
            mk.setAccessible(true);
            FatalErrorHandler handler = (FatalErrorHandler) mk.invoke(fatal, tms.size());
            WorkingDirectory wd = ((WorkingDirectory) field("workingDirectory"))
                    .createSubWorkingDirectory("tm_" + tms.size());
            TaskExecutor te = TaskManagerRunner.startTaskManager(conf, new ResourceID(UUID.randomUUID().toString()),
                    rpc, getHaServices(), (HeartbeatServices) field("heartbeatServices"),
                    (MetricRegistry) field("metricRegistry"), (BlobCacheService) field("blobCacheService"),
                    useLocalCommunication(), resources, wd, handler,
                    (DelegationTokenReceiverRepository) field("delegationTokenReceiverRepository"));
            te.start();
            tms.add(te);
        }
    }

    @SuppressWarnings("unchecked")
    private <T> T field(String name) throws ReflectiveOperationException {
        Field f = MiniCluster.class.getDeclaredField(name);
        f.setAccessible(true);
        return (T) f.get(this);
    }
}
