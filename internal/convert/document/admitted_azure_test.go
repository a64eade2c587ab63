package document_test

import (
	"testing"

	capzv1 "sigs.k8s.io/cluster-api-provider-azure/api/v1beta1"

	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/provider"
)

// TestConvertedAzureObjectsAreAdmittedAsIs is TestConvertedObjectsAreAdmittedAsIs for Azure:
// the Cluster API objects converted from every Azure fixture are created in a lab with CAPZ's
// CRDs, installed from the module go.mod pins, and what is stored must be what the converter
// wrote.
func TestConvertedAzureObjectsAreAdmittedAsIs(t *testing.T) {
	objs := convertedFixtures(t, "azure")
	if len(objs) < 6 {
		t.Fatalf("only %d converted objects; the fixtures no longer exercise conversion", len(objs))
	}
	l := labtest.Start(t)
	installModuleCRDs(t, l, provider.Azure(), capzv1.AzureMachine{})
	checkAdmittedAsIs(t, adminClient(t, l), objs)
}
