// Command mpi-operator runs the MPI Operator's controller out of cluster, for one box.
//
// It is the pinned release's controller (github.com/kubeflow/mpi-operator/pkg/controller), with the release's flags
// and client settings, started as cmd/mpi-operator/app.Run starts it, less what a box does not use: the health check
// server, which app.Run binds to port 8080 of every address (a constant, so a second box's operator exited), leader
// election, which that server reports on (a box runs one operator), the metrics server (-monitoring-port) and
// app.Run's reading of $KUBECONFIG over -kubeConfig (the operator talks to its box only). So boxes run their
// operators side by side. What the controller does with MPIJobs, its events included, is the release's own code.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app/options"
	mpijobclientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	kubeflowscheme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	informers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	controllersv1 "github.com/kubeflow/mpi-operator/pkg/controller"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeapiserver "k8s.io/apiserver/pkg/server"
	kubeinformers "k8s.io/client-go/informers"
	kubeclientset "k8s.io/client-go/kubernetes"
	clientgokubescheme "k8s.io/client-go/kubernetes/scheme"
	restclientset "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	klog.InitFlags(nil)
	opt := options.NewServerOption()
	opt.AddFlags(flag.CommandLine)
	flag.Parse()
	if opt.GangSchedulingName != "" {
		klog.Fatalf("-gang-scheduling is not supported here: the stacks run the operator without it")
	}

	stopCh := kubeapiserver.SetupSignalHandler()
	cfg, err := clientcmd.BuildConfigFromFlags(opt.MasterURL, opt.Kubeconfig)
	if err != nil {
		klog.Fatalf("Error building kubeConfig: %s", err.Error())
	}
	cfg.QPS = float32(opt.QPS)
	cfg.Burst = opt.Burst
	kubeClient, err := kubeclientset.NewForConfig(restclientset.AddUserAgent(cfg, "mpi-operator"))
	if err != nil {
		klog.Fatalf("%v", err)
	}
	mpiJobClient, err := mpijobclientset.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("%v", err)
	}
	// as app.Run's checkCRDExists: exit when the MPIJob CRD is not served (the box restarts the operator)
	if _, err := mpiJobClient.KubeflowV2beta1().MPIJobs(opt.Namespace).List(context.TODO(), metav1.ListOptions{}); err != nil {
		klog.Error(err)
		if errors.IsNotFound(err) {
			klog.Info("CRD doesn't exist. Exiting")
			os.Exit(1)
		}
	}
	if err := kubeflowscheme.AddToScheme(clientgokubescheme.Scheme); err != nil {
		klog.Fatalf("CoreV1 Add Scheme failed: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stopCh
		cancel()
	}()
	var kubeOpts []kubeinformers.SharedInformerOption
	var kubeflowOpts []informers.SharedInformerOption
	if opt.Namespace != metav1.NamespaceAll {
		kubeOpts = append(kubeOpts, kubeinformers.WithNamespace(opt.Namespace))
		kubeflowOpts = append(kubeflowOpts, informers.WithNamespace(opt.Namespace))
	}
	kubeInformerFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeOpts...)
	kubeflowInformerFactory := informers.NewSharedInformerFactoryWithOptions(mpiJobClient, 0, kubeflowOpts...)
	controller, err := controllersv1.NewMPIJobController(
		ctx,
		kubeClient,
		mpiJobClient,
		nil, // no gang scheduling: no Volcano client
		nil, // nor scheduler-plugins'
		kubeInformerFactory.Core().V1().ConfigMaps(),
		kubeInformerFactory.Core().V1().Secrets(),
		kubeInformerFactory.Core().V1().Services(),
		kubeInformerFactory.Batch().V1().Jobs(),
		kubeInformerFactory.Core().V1().Pods(),
		kubeInformerFactory.Scheduling().V1().PriorityClasses(),
		kubeflowInformerFactory.Kubeflow().V2beta1().MPIJobs(),
		opt)
	if err != nil {
		klog.Fatalf("Failed to setup the controller: %v", err)
	}
	go kubeInformerFactory.Start(ctx.Done())
	go kubeflowInformerFactory.Start(ctx.Done())
	if err := controller.Run(opt.Threadiness, stopCh); err != nil {
		klog.Fatalf("Error running controller: %s", err.Error())
	}
}
