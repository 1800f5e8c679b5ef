package dev.comet.interop.controller;

import java.io.IOException;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.BrokerStartup;
import org.apache.rocketmq.broker.controller.ReplicasManager;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.MessageStore;
import org.apache.rocketmq.store.ha.DefaultHAService;
import org.apache.rocketmq.store.ha.HAService;
import org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAService;

/**
 * Apache's {@code BrokerStartup} (same arguments, same behaviour), except that the HA listener of a
 * broker in controller mode accepts on the broker's {@code bindAddress} instead of the wildcard
 * address. In controller mode the message store creates an {@link AutoSwitchHAService} directly
 * (the HAService service-loader hook is only used without a controller) and that service has no
 * bind-address setting; on this machine every server must listen on loopback only.
 *
 * <p>After {@code createBrokerController} (which builds the store and the ReplicasManager, both
 * holding the not yet initialised HA service) the service is replaced in both places by a subclass
 * whose {@code init} repoints the accept socket before the store starts it. Replication, election
 * and everything else are untouched.
 */
public final class LoopbackBrokerStartup {
    private LoopbackBrokerStartup() {
    }

    public static void main(String[] args) throws Exception {
        BrokerController controller = BrokerStartup.createBrokerController(args);
        if (controller == null) {
            System.exit(-1);
        }
        String host = controller.getNettyServerConfig().getBindAddress();
        MessageStore store = controller.getMessageStore();
        if (!(store instanceof DefaultMessageStore)) {
            throw new IllegalStateException("unexpected message store " + store.getClass().getName());
        }
        HAService old = store.getHaService();
        if (old != null && old.getClass() == AutoSwitchHAService.class) {
            LoopbackAutoSwitchHAService replacement = new LoopbackAutoSwitchHAService(host);
            set(DefaultMessageStore.class, store, "haService", replacement);
            ReplicasManager replicas = controller.getReplicasManager();
            if (replicas != null) {
                set(ReplicasManager.class, replicas, "haService", replacement);
            }
            System.out.printf("HA listener of this broker bound to %s%n", host);
        }
        BrokerStartup.start(controller);
    }

    private static void set(Class<?> owner, Object target, String name, Object value) throws ReflectiveOperationException {
        Field field = owner.getDeclaredField(name);
        field.setAccessible(true);
        field.set(target, value);
    }

    /** AutoSwitchHAService whose accept socket binds to one address. */
    static final class LoopbackAutoSwitchHAService extends AutoSwitchHAService {
        private final String host;

        LoopbackAutoSwitchHAService(String host) {
            this.host = host;
        }

        @Override
        public void init(DefaultMessageStore store) throws IOException {
            super.init(store);
            int port = store.getMessageStoreConfig().getHaListenPort();
            try {
                Class<?> acceptClass = Class.forName(DefaultHAService.class.getName() + "$AcceptSocketService");
                Field listen = acceptClass.getDeclaredField("socketAddressListen");
                listen.setAccessible(true);
                listen.set(this.acceptSocketService, new InetSocketAddress(host, port));
            } catch (ReflectiveOperationException e) {
                throw new IOException("cannot rebind the HA listener to " + host + ":" + port, e);
            }
        }
    }
}
